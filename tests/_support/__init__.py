"""Helpers several test folders share (HLO fixtures, the tutorial step, browser, JupyterLab)."""
