"""The command line ``mha-course``: student copies, executing notebooks, training the tiny models."""
