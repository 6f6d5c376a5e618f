"""Tests of the checkers, one file per checker module (tests/check/test_<stem>.py)."""
