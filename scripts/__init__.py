"""Maintenance scripts: the test-suite runner (test.sh) and the screenshots of every page."""
