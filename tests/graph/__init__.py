"""Tests of the HLO graph viewer: the tree, payload, page, first view, glance and diff view."""
