"""Helpers shared by the explorer's tests."""
import io

import numpy as np
from hypothesis import strategies as st
from PIL import Image

import mha_course as mc
from mha_course import explorer as ex

SIZES = st.sampled_from([4, 6, 8, 12, 16]).flatmap(
    lambda d: st.tuples(st.just(d), st.sampled_from(mc.valid_heads(d)), st.integers(1, 9)))


def explorer_trace(d_model=16, h=4, seq_len=6, seed=0):
    return ex.explorer_trace(ex.sentence_tokens(ex.DEFAULT_SENTENCE, seq_len), d_model, h, seed)


def pixels(png: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).astype(int)


def texts(fig) -> set:
    """Every text drawn on a figure and its axes."""
    return {t.get_text() for ax in fig.axes for t in ax.texts} | {t.get_text() for t in fig.texts}


def shown(matrix) -> np.ndarray:
    """The numbers a heatmap of the explorer shows (gaps between heads as NaN)."""
    return np.ma.filled(matrix.image.get_array().astype(float), np.nan)
