"""Tests of the matplotlib views, one file per view module (tests/views/test_<stem>.py)."""
