"""Tests of mha_course/lessons/, one file per module (tests/lessons/test_<stem>.py)."""
