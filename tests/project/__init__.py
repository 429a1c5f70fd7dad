"""Tests of the project as a whole: README, notebooks, JupyterLab, install, CLI, architecture."""
