"""Tests of mha_course/explorer/, one file per module (tests/explorer/test_<stem>.py)."""
