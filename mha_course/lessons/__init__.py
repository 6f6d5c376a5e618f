"""The lessons' numpy experiments, one module per topic (numpy only; no plotting, no widgets).

``qkv`` (00-01), ``scaling`` (02), ``why_heads`` (03), ``complexity`` (05), ``model`` (the tiny
transformer of 08: its one forward pass, training, checkpoints), ``gqa`` (09: decoding with caches),
``misconceptions`` and ``quiz`` (11), ``bridge`` (12). They build on the core (``mha_course``) only.
"""
