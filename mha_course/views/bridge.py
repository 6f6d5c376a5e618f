"""The view of notebook 12: per-head weights beside ``nn.MultiheadAttention``'s default average.

Taught in 12_from_numpy_to_pytorch.ipynb.
"""
from __future__ import annotations

import matplotlib.pyplot as plt

from ..lessons.bridge import mean_peak_weight
from ..lessons.qkv import sentence_trace
from . import attention as plots

__all__ = ["averaged_weights_figure"]

MAX_HEADS_SHOWN = 4


def averaged_weights_figure(d_model: int, h: int, seq_len: int, seed: int = 0):
    """d_model, h, seq_len -> Figure: the first heads' weights (T, T) and their mean over all h heads.

    The mean is what ``nn.MultiheadAttention`` returns by default (``average_attn_weights=True``);
    each panel's title gives its mean peak weight (``bridge.mean_peak_weight``).

    >>> fig = averaged_weights_figure(8, 2, 5)
    >>> [ax.get_title().splitlines()[0] for ax in fig.axes[:3]]  # then the colour bar
    ['head 0', 'head 1', 'mean of 2 heads']
    >>> plt.close(fig)
    """
    tokens = plots.sentence_tokens(seq_len, seed)
    w = sentence_trace(tokens, d_model, h, seed)["weights"][0]  # (h, T, T)
    shown = min(h, MAX_HEADS_SHOWN)
    fig, axes = plt.subplots(1, shown + 1, figsize=(2.9 * (shown + 1), 3.3), layout="constrained")
    for i, ax in enumerate(axes[:shown]):
        plots.attention_heatmap(w[i], tokens, tokens, ax=ax, colorbar=False,
                                title=f"head {i}\npeak {mean_peak_weight(w[i]):.2f}")
        ax.title.set_color(plots.head_color(i))
        ax.set_ylabel("query" if i == 0 else "")
    plots.attention_heatmap(w.mean(axis=0), tokens, tokens, ax=axes[-1],
                            title=f"mean of {h} heads\npeak {mean_peak_weight(w.mean(axis=0)):.2f}")
    axes[-1].set_ylabel("")
    more = f" (heads {shown}..{h - 1} not drawn)" if h > shown else ""
    fig.suptitle(f"per head (average_attn_weights=False) vs the default average{more}", fontsize=10)
    return fig
