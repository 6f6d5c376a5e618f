"""The attack generator's table: every public callable, a valid call of it, and the attacks on each argument.

``public_callables()`` finds the surface by introspection (``mha_course.__all__``, every public function and
class of lessons/, views/, widgets/, efficient, gqa, positions); nothing here lists callables by hand except
``OVERRIDES`` (arguments the name table cannot guess) and ``EXEMPT`` (callables that write files or train
for minutes, with the test that covers them instead).

A valid call is built from the parameter names: ``PARAMS[name]`` gives a value of one small shared world
(B = 1, h = 2, T = S = 4, d_model = 8, d_k = 4; a 2-layer model of d_model 8) and the *kind* of the
argument, which says how it is attacked (``attacks(kind, value)``). The test module perturbs one argument
of the valid call at a time and asserts the public surface's contract.
"""
from __future__ import annotations

import dataclasses
import functools
import importlib
import inspect
import pkgutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

import mha_course as mc

# ----------------------------------------------------------------------------- the surface
CORE_MODULES = ("mha_course", "mha_course.efficient", "mha_course.gqa", "mha_course.positions", "mha_course.kvcache",
                "mha_course.subquadratic")
PACKAGES = ("mha_course.lessons", "mha_course.views", "mha_course.widgets")


def surface_modules() -> list[str]:
    """The modules whose public callables are attacked: the core four and every module of the packages."""
    names = list(CORE_MODULES)
    for pkg_name in PACKAGES:
        pkg = importlib.import_module(pkg_name)
        names += [f"{pkg_name}.{m.name}" for m in pkgutil.iter_modules(pkg.__path__) if not m.name.startswith("_")]
    return names


def public_callables() -> dict[str, Callable]:
    """{qualified name: callable} for every public function and class of the surface, each once.

    A module's public names are its ``__all__`` (the package's for ``mha_course``), else every name
    without a leading underscore defined in that module. The qualified name is the defining module's.
    """
    found: dict[str, Callable] = {}
    seen: set[int] = set()
    for mod_name in surface_modules():
        mod = importlib.import_module(mod_name)
        names = getattr(mod, "__all__", None)
        if names is None:
            names = [n for n, v in vars(mod).items()
                     if not n.startswith("_") and getattr(v, "__module__", None) == mod_name]
        for name in names:
            obj = getattr(mod, name)
            if not (inspect.isfunction(obj) or inspect.isclass(obj)) or id(obj) in seen:
                continue
            seen.add(id(obj))
            found[f"{obj.__module__}.{obj.__qualname__}"] = obj
    return found


def is_record(obj) -> bool:
    """A dataclass or NamedTuple that only holds fields (no __post_init__ check, no methods of its own)."""
    if not inspect.isclass(obj):
        return False
    if dataclasses.is_dataclass(obj):
        own = {n for n, v in vars(obj).items() if inspect.isfunction(v) and not n.startswith("__")}
        return "__post_init__" not in vars(obj) and not own
    return issubclass(obj, tuple) and hasattr(obj, "_fields")


# ----------------------------------------------------------------------------- the small world
B, H, T, D = 1, 2, 4, 8
DK = D // H


def _rng(seed=0):
    return np.random.default_rng(seed)


class World:
    """The shared, lazily built objects valid calls are made of (each built once per session)."""

    @functools.cached_property
    def config(self):
        from mha_course.lessons import model
        return model.Config(vocab=8, seq_len=8, d_model=D, h=H, n_layers=2, positions="rope", batch=4, steps=2)

    @functools.cached_property
    def model(self):
        from mha_course.lessons import model
        return model.init_model(self.config, _rng(1))

    @functools.cached_property
    def batch(self):
        from mha_course.lessons import model
        return model.make_batch(self.config, _rng(2), batch=2)

    @functools.cached_property
    def tokens(self):
        return self.batch.tokens

    @functools.cached_property
    def weights_by_layer(self):
        from mha_course.lessons import model
        _, weights = model.forward(self.model, self.tokens, self.config)  # [(B, h, T, T)] * L
        return weights

    @functools.cached_property
    def pair(self):
        from mha_course.lessons import circuits
        return circuits.make_pair(self.config, _rng(3), n=4, repeat=3)

    @functools.cached_property
    def mha_params(self):
        return mc.init_params(D, rng=_rng(4))

    @functools.cached_property
    def gqa_params(self):
        return mc.init_gqa_params(D, H, 1, rng=_rng(5))

    @functools.cached_property
    def mla_params(self):
        return mc.init_mla_params(D, H, 4, rng=_rng(6))

    @functools.cached_property
    def trace(self):
        return mc.trace(self.x, self.mha_params, H)

    @functools.cached_property
    def x(self):
        return _rng(7).normal(size=(B, T, D))

    def qkv(self, which):
        return _rng({"Q": 8, "K": 9, "V": 10}[which]).normal(size=(B, H, T, DK))

    @functools.cached_property
    def weights(self):
        return mc.scaled_dot_product_attention(self.qkv("Q"), self.qkv("K"), self.qkv("V"),
                                               mask=mc.causal_mask(T))[1]

    @functools.cached_property
    def history(self):
        from mha_course.lessons import training
        _, history = training.train(self.config, snapshot_every=1)
        return history

    @functools.cached_property
    def trajectories(self):
        from mha_course.lessons import circuits
        return circuits.load_trajectories()

    @functools.cached_property
    def scaling_result(self):
        from mha_course.lessons import scaling
        return scaling.scaling_experiment(_rng(11), d_k_values=(1, 4, 16), n_queries=20, n_keys=4)

    @functools.cached_property
    def questions(self):
        from mha_course.lessons import quiz
        return quiz.load_questions()

    @functools.cached_property
    def long_models(self):
        from mha_course.lessons import long_context as lc
        return {name: lc.load_scheme(name) for name in ("rope", "alibi")}

    @functools.cached_property
    def learned(self):
        from mha_course.lessons import model
        config = self.config._replace(positions="learned") if hasattr(self.config, "_replace") else \
            dataclasses.replace(self.config, positions="learned")
        return config, model.init_model(config, _rng(29))

    @functools.cached_property
    def why_x(self):
        from mha_course.lessons import why_heads
        return why_heads.gather_inputs(3, T=4, content=4, d_model=16, rng=_rng(30))

    @functools.cached_property
    def why_y(self):
        from mha_course.lessons import why_heads
        return why_heads.gather_target(self.why_x, 0, 2, content=4)

    @functools.cached_property
    def scratch(self):
        """A temporary folder for the calls that write a file (never the package's or the working folder)."""
        import atexit
        import pathlib
        import shutil
        import tempfile
        folder = tempfile.mkdtemp(prefix="mha-course-attack-")
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        return pathlib.Path(folder)

    @functools.cached_property
    def table(self):
        from mha_course.lessons import long_context as lc
        return lc.extrapolation_table(self.long_models, lengths=(16, 32), n=4)


WORLD = World()


# ----------------------------------------------------------------------------- argument kinds
@dataclass(frozen=True)
class Spec:
    """How to make a valid value of one argument (``make(world)``) and how to attack it (``kind``).

    Kinds: "size" (an int >= 1), "count" (an int >= 0), "index" (an int below ``bound``), "float"
    (a finite number), "array" (a float array), "mask" (a bool array), "tokens" (ints below
    ``bound``), "option" (one of ``options``), "scaling" (a RoPE scaling dict), "flag" (a bool),
    "object" (a value of a type of the package), "rng" (a numpy Generator), "free" (not attacked:
    axes, titles, labels, callbacks).
    """
    make: Callable[[World], Any]
    kind: str
    bound: int = 0
    options: tuple = ()


def size(v):
    return Spec(lambda w: v, "size")


def count(v):
    return Spec(lambda w: v, "count")


def index(v, bound):
    return Spec(lambda w: v, "index", bound=bound)


def array(make):
    return Spec(make, "array")


def obj(make):
    return Spec(make, "object")


def option(v, options):
    return Spec(lambda w: v, "option", options=tuple(options))


FREE = Spec(lambda w: None, "free")

PARAMS: dict[str, Spec] = {
    # sizes
    **{n: size(v) for n, v in dict(
        h=H, d_model=D, T=T, S=T, d_k=DK, d_v=DK, seq_len=T, layers=2, n_layers=2, max_len=8, window=2,
        block_size=2, block_rows=2, n_splits=2, workers=2, d=4, d_latent=4, patch=2, itemsize=4,
        bytes_per_number=2, scale_bytes=2, n_blocks=8, vocab_size=5, content=2, n_queries=3, n_keys=3,
        repeats=1, every=1, n_new=2, episodes=2, ncols=2, dilation=1, max_offset=4, eval_len=16,
        train_len=16, episode_len=4, n_probe=4).items()},
    "batch": Spec(lambda w: 1, "size"),
    "n": size(4),
    "h_kv": size(1),
    "bits": option(8, (2, 4, 8)),
    # counts (>= 0)
    **{n: count(v) for n, v in dict(sinks=1, offset=2, prefix=2, n_global=1, n_random=1, d_rope=0,
                                     start=0, seed=0, snapshot_every=0).items()},
    # indices
    "axis": index(-1, 2),
    "layer": index(0, 2), "head": index(0, H), "source": index(0, 2), "reader": index(1, 2),
    "query": index(0, T), "position": index(1, 8), "step": index(1, 2), "i": index(0, H),
    "token": index(1, 8), "t": index(1, 8), "a": index(0, T), "b": index(1, T),
    # floats
    **{n: Spec(lambda w, v=v: v, "float") for n, v in dict(
        base=10000.0, factor=2.0, strength=0.5, sharpness=4.0, tol=1e-6, lr=1e-3, eps=1e-8, b1=0.9, b2=0.999,
        threshold=0.5, uniform=0.25, baseline=0.1, beta_fast=32.0, beta_slow=1.0).items()},
    # arrays
    "x": array(lambda w: w.x), "Q": array(lambda w: w.qkv("Q")), "K": array(lambda w: w.qkv("K")),
    "V": array(lambda w: w.qkv("V")), "q": array(lambda w: w.qkv("Q")[0, 0, 0]),
    "k": array(lambda w: w.qkv("K")[0, 0, 0]),
    "weights": array(lambda w: w.weights), "scores": array(lambda w: w.weights[0, 0] * 3.0),
    "context": array(lambda w: w.x[:, :3]), "grad_out": array(lambda w: w.x * 0.5),
    "W": array(lambda w: _rng(12).normal(size=(4, 4))), "W_A": array(lambda w: _rng(13).normal(size=(4, 3))),
    "W_B": array(lambda w: _rng(14).normal(size=(3, 4))),
    "logits": array(lambda w: _rng(15).normal(size=(2, 8, 8))),
    "values": array(lambda w: _rng(16).normal(size=(6,))), "p": array(lambda w: w.weights[0, 0, -1]),
    "image": array(lambda w: _rng(17).uniform(size=(4, 4, 3))),
    "xs": array(lambda w: np.array([1.0, 2.0, 4.0, 8.0])), "ys": array(lambda w: np.array([1.0, 4.0, 16.0, 64.0])),
    "seq_lens": array(lambda w: np.array([4, 8, 16])), "lengths": array(lambda w: np.array([3, 4])),
    "positions": array(lambda w: np.arange(T)), "delta": array(lambda w: _rng(18).normal(size=(T, D))),
    "matrix": array(lambda w: _rng(19).normal(size=(3, 3))), "grid": array(lambda w: _rng(20).normal(size=(T, T))),
    "scores_block": array(lambda w: w.weights[0] * 2.0), "V_block": array(lambda w: w.qkv("V")[0]),
    "scale": array(lambda w: np.full((B, H, T, 1), 0.01)),
    # masks and tokens
    "mask": Spec(lambda w: mc.causal_mask(T), "mask"),
    "tokens": Spec(lambda w: w.tokens, "tokens", bound=8),
    "targets": Spec(lambda w: w.batch.targets, "tokens", bound=8),
    "doc_ids": Spec(lambda w: np.array([0, 0, 1, 1]), "tokens", bound=10**9),
    "prompt": Spec(lambda w: w.tokens[:, :3], "tokens", bound=8),
    "prompts": Spec(lambda w: [w.tokens[0, :3], w.tokens[1, :2]], "tokens", bound=8),
    "global_tokens": Spec(lambda w: [0], "tokens", bound=T),
    # options
    "layout": option("interleaved", ("interleaved", "halves")),
    "convention": option("block", ("keep", "block", "additive")),
    "kind": option("stretched", ("stretched", "shifted")),
    "task": option("induction", ("induction", "previous_token")),
    "via": option("kv", ("q", "k", "v", "kv")),
    "corrupt": option("key", ("key", "query")),
    "scheme": option("rope", ("rope", "alibi")),
    "what": Spec(lambda w: "checkpoint", "free"), "fix": Spec(lambda w: "run it again", "free"),
    "scaling": Spec(lambda w: {"kind": "linear", "factor": 2.0}, "scaling"),
    "rope_scaling": Spec(lambda w: None, "scaling"),
    "rope_base": Spec(lambda w: None, "float"),
    # flags
    **{n: Spec(lambda w: False, "flag") for n in ("causal", "buggy", "use_cache", "progress")},
    # objects
    "params": obj(lambda w: w.mha_params), "config": obj(lambda w: w.config), "pair": obj(lambda w: w.pair),
    "trace": obj(lambda w: w.trace), "history": obj(lambda w: w.history), "state": obj(
        lambda w: mc.online_softmax_start(T, DK, batch=(H,))),
    "trajectories": obj(lambda w: w.trajectories), "result": obj(lambda w: w.scaling_result),
    "question": obj(lambda w: w.questions[0]), "questions": obj(lambda w: w.questions),
    "models": obj(lambda w: w.long_models), "table": obj(lambda w: w.table),
    "weights_by_layer": obj(lambda w: w.weights_by_layer),
    "rng": Spec(lambda w: _rng(21), "rng"),
    # not attacked
    **{n: FREE for n in ("ax", "axes", "fig", "title", "callback", "row_labels", "col_label", "row_label",
                         "xlabel", "ylabel", "labels", "q_tokens", "k_tokens", "context_tokens", "label",
                         "colorbar", "annotate", "log_x", "vlim", "vmax", "mark", "figsize", "show",
                         "copy_start", "template", "draw", "cache", "caches", "core", "traces", "tape",
                         "patch", "ablate", "reference", "parent", "path", "folder")},
}


def spec_for(qualname: str, param: inspect.Parameter) -> Spec | None:
    """The Spec of one parameter: OVERRIDES first, then PARAMS by name, else None (no strategy)."""
    over = OVERRIDES.get(qualname, {})
    if param.name in over:
        return over[param.name]
    note = str(param.annotation)
    for prefix, table in MODULE_PARAMS.items():
        if qualname.startswith(prefix) and param.name in table:
            return table[param.name]
    if param.name == "batch" and "Batch" in note:
        return obj(lambda w: w.batch)
    if param.name == "batch" and "int" not in note and "config" in inspect.signature(FUNCS[qualname]).parameters:
        return obj(lambda w: w.batch)
    if param.name == "params" or "Params" in note or "Model" in note:
        for word, spec in (("GQAParams", GQA), ("MLAParams", MLA), ("MHAParams", None), ("Model", MODEL)):
            if word in note:
                return spec or PARAMS["params"]
        if param.name == "params" and "config" in inspect.signature(FUNCS[qualname]).parameters:
            return MODEL
    return PARAMS.get(param.name)


def params_of(fn) -> list[inspect.Parameter]:
    """The parameters a call may pass (no *args/**kwargs)."""
    sig = inspect.signature(fn)
    return [p for p in sig.parameters.values()
            if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) and p.name != "self"]


def exempt(qualname: str) -> bool:
    """EXEMPT by qualified name, or by the bare name of an EXEMPT entry (a moved trainer is never run)."""
    if qualname in EXEMPT or qualname.rsplit(".", 1)[1] in {q.rsplit(".", 1)[1] for q in EXEMPT}:
        return True
    first = (inspect.getdoc(FUNCS.get(qualname)) or "").split("\n")[0]
    return first.startswith("Train") or "(slow" in first  # a new trainer says so in its first line


def base_kwargs(qualname: str, fn) -> tuple[dict, dict[str, Spec], list[str]]:
    """(kwargs of a valid call, {param: Spec}, [required params with no Spec])."""
    kwargs, specs, missing = {}, {}, []
    for p in params_of(fn):
        spec = spec_for(qualname, p)
        if spec is None:
            if p.default is p.empty:
                missing.append(p.name)
            continue
        specs[p.name] = spec
        passed = qualname in OVERRIDES and p.name in OVERRIDES[qualname]
        if p.default is p.empty or passed:
            kwargs[p.name] = spec.make(WORLD)
    return kwargs, specs, missing


FUNCS = public_callables()


def _w(attr):
    return lambda w: getattr(w, attr)


MODEL = obj(_w("model"))
GQA = obj(_w("gqa_params"))
MLA = obj(_w("mla_params"))

def _arr(make):
    return array(make)


def _fixed(v, kind="object"):
    return Spec(lambda w: v, kind)


LC = "mha_course.lessons.long_context."
NOTEBOOKS = Path(mc.__path__[0]).parent / "notebooks"
QUESTION_2 = obj(lambda w: __import__("mha_course.lessons.quiz", fromlist=["x"]).Question(
    "q", "04_concat_output", "4", "Params for h = 8?", ("4·D²", "8·4·D²"), 0, "Same for any h."))
LS = "mha_course.lessons.long_serving."  # notebook 13's serving caches, re-exported by long_context
CD = "mha_course.lessons.circuits_data."  # notebook 14's helpers, re-exported by lessons.circuits
CS = "mha_course.lessons.circuits_scores."
CP = "mha_course.lessons.circuits_patching."
CR = "mha_course.lessons.circuits_runs."
VW = "mha_course.views."
WH = "mha_course.lessons.why_heads."
TOKENS_1D = Spec(lambda w: w.tokens[0], "tokens", bound=8)
LETTER_TOKENS = Spec(lambda w: w.tokens[0], "tokens", bound=26)  # views.circuits draws ids 0..25 as a..z
WEIGHTS_1SEQ = obj(lambda w: [a[0] for a in w.weights_by_layer])  # [(h, T, T)] * L of one sequence
LONG_CONFIG = obj(lambda w: w.long_models["rope"][0])
LONG_MODEL = obj(lambda w: w.long_models["rope"][1])
LONG_BATCH = obj(lambda w: __import__("mha_course.lessons.long_context", fromlist=["x"]).stretched_batch(
    w.long_models["rope"][0], 16, _rng(22), n=2))

# Names that mean something else in one module (or package): {qualified-name prefix: {param: Spec}}.
MODULE_PARAMS: dict[str, dict[str, Spec]] = {
    LC: {"config": LONG_CONFIG, "params": LONG_MODEL, "batch": LONG_BATCH, "T": size(16), "n": size(2),
         "window": size(8), "bits": option(8, range(2, 17))},
    LS: {"config": LONG_CONFIG, "params": LONG_MODEL},
    "mha_course.views.long_context.": {"config": LONG_CONFIG, "params": LONG_MODEL, "batch": LONG_BATCH,
                                       "n": size(2), "window": size(8), "sinks": count(1), "factor": Spec(
                                           lambda w: 2.0, "float"),
                                       "lengths": _arr(lambda w: np.array([16, 32]))},  # the table's lengths
    "mha_course.widgets.long_context.": {"config": LONG_CONFIG, "params": LONG_MODEL, "batch": LONG_BATCH,
                                         "models": obj(lambda w: {("rope", 16): w.long_models["rope"]}),
                                         "window": size(8)},
    WH: {"d_model": size(16), "T": size(4), "content": size(4),
         "x": _arr(lambda w: w.why_x), "y": _arr(lambda w: w.why_y), "a": index(0, 4), "b": index(2, 4),
         "n": size(3), "concat": _arr(lambda w: w.why_x), "out": _arr(lambda w: w.why_y * 0.9),
         "p": _arr(lambda w: np.full(4, 0.25))},
    VW + "circuits.": {"tokens": LETTER_TOKENS, "weights": WEIGHTS_1SEQ, "head": Spec(lambda w: (0, 1), "object"),
                       "token": index(3, 8), "position": index(3, 8), "step": index(5, 801)},
    VW + "model.": {"tokens": TOKENS_1D, "weights": WEIGHTS_1SEQ},
    "mha_course.widgets.circuits.": {"tokens": LETTER_TOKENS, "weights_by_layer": WEIGHTS_1SEQ},
    "mha_course.views.efficient.": {"step": index(1, 3),  # S = 4 keys in blocks of 2: steps 1 and 2
                                    "Q": _arr(lambda w: w.qkv("Q")[0, 0]), "K": _arr(lambda w: w.qkv("K")[0, 0]),
                                    "V": _arr(lambda w: w.qkv("V")[0, 0]), "scores": _arr(
                                        lambda w: w.weights[0, 0] * 3.0)},
    "mha_course.views.attention.": {"weights": _arr(lambda w: w.weights[0, 0])},
    "mha_course.views.positions.": {"patch": size(2)},
}

# Arguments the name table cannot guess for one callable: {qualified name: {param: Spec}}.
OVERRIDES: dict[str, dict[str, Spec]] = {
    "mha_course.heads.combine_heads": {"x": _arr(lambda w: w.qkv("V"))},
    "mha_course.mha.Trace": {"stages": obj(lambda w: w.trace.stages), "mask": FREE},
    "mha_course.masks.leak_probe": {"attn_fn": _fixed(lambda x: x.cumsum(axis=-2), "free")},
    "mha_course.positions.rope_attention_factor": {"scaling": Spec(lambda w: {"type": "yarn", "factor": 2.0,
                                                                             "original_max_position": 8}, "scaling")},
    "mha_course.positions.rope_inv_freq": {"scaling": Spec(lambda w: {"type": "linear", "factor": 2.0}, "scaling")},
    "mha_course.positions.apply_rope": {"scaling": Spec(lambda w: {"type": "linear", "factor": 2.0}, "scaling")},
    "mha_course.positions.rope_angles": {"scaling": Spec(lambda w: {"type": "linear", "factor": 2.0}, "scaling")},
    "mha_course.kvcache.dequantize_kv": {"q": _arr(lambda w: mc.quantize_kv(w.qkv("K"))[0]),
                                     "scale": _arr(lambda w: mc.quantize_kv(w.qkv("K"))[1])},
    CS + "duplicate_token_score": {"tokens": Spec(lambda w: np.array([[1, 2, 1, 2]]), "tokens", bound=8),
                                   "vocab": size(8)},
    CS + "prefix_matching_score": {"tokens": Spec(lambda w: np.array([[1, 2, 1, 2]]), "tokens", bound=8),
                                   "vocab": size(8)},
    CS + "head_scores": {"vocab": size(8)},
    CS + "repeat_induction_score": {"weights": _arr(lambda w: w.weights_by_layer[-1]), "half": size(4)},
    CD + "repeated_tokens": {"vocab": size(8), "half": size(4)},
    CR + "compare_over_seeds": {"a": _arr(lambda w: np.array([2.0, 2.1, 1.9])),
                                "b": _arr(lambda w: np.array([1.0, 1.0, 1.1]))},
    CR + "formed": {"results": obj(lambda w: __import__("mha_course.lessons.circuits_runs", fromlist=["x"])
                                   .load_seed_results())},
    "mha_course.efficient.merge_attention_partials": {
        "outs": obj(lambda w: list(mc.efficient.split_kv_partials(w.qkv("Q"), w.qkv("K"), w.qkv("V"), 2)[0])),
        "lses": obj(lambda w: list(mc.efficient.split_kv_partials(w.qkv("Q"), w.qkv("K"), w.qkv("V"), 2)[1]))},
    "mha_course.positions.patchify": {"patch": size(2)},
    "mha_course.positions.dynamic_rope_scaling": {"scaling": Spec(lambda w: {"type": "ntk", "factor": 2.0,
                                                                            "original_max_position": 8}, "scaling"),
                                                  "seq_len": size(16)},
    "mha_course.positions.rotate": {"x": _arr(lambda w: w.qkv("Q")), "angles": _arr(
        lambda w: mc.positions.rope_angles(np.arange(T), DK))},
    # An optional mask or context is passed in the valid call, so that its "same numbers" attacks are
    # compared with a call that has it (not with the call without it).
    "mha_course.attention.scaled_dot_product_attention": {"mask": PARAMS["mask"]},
    "mha_course.backward.mha_backward": {"mask": PARAMS["mask"], "context": _arr(lambda w: w.x)},
    "mha_course.efficient.tiled_attention": {"mask": PARAMS["mask"]},
    "mha_course.efficient.split_kv_partials": {"mask": PARAMS["mask"]},
    "mha_course.efficient.split_kv_attention": {"mask": PARAMS["mask"]},
    "mha_course.gqa.grouped_query_attention": {"mask": PARAMS["mask"], "context": _arr(lambda w: w.x)},
    "mha_course.masks.causal_mask": {"window": size(2)},
    "mha_course.masks.fully_masked_rows": {"mask": obj(lambda w: mc.causal_mask(T))},  # any (..., T, S) is valid
    "mha_course.kvcache.RollingKVCache": {"positions": option("absolute", ("absolute", "cache"))},
    "mha_course.mha.multi_head_attention": {"mask": PARAMS["mask"], "context": _arr(lambda w: w.x)},
    "mha_course.gqa.mla_attention": {"mask": PARAMS["mask"]},
    "mha_course.gqa.kv_cache_table": {"d_latent": size(4), "d_rope": count(2)},
    "mha_course.kvcache.quantize_kv": {"bits": option(8, range(2, 17))},  # 2 to 16 bits, as documented
    "mha_course.masks.mask_as": {"mask": obj(lambda w: mc.causal_mask(T))},  # any shape is valid
    "mha_course.masks.document_mask": {"doc_ids": _arr(lambda w: np.array([0, 0, 1, 1]))},  # labels: no upper bound
    "mha_course.lessons.bridge.params_from_torch_state": {"state": obj(lambda w: __import__(
        "mha_course.lessons.bridge", fromlist=["x"]).torch_state_dict(w.mha_params))},
    CS + "positional_qk_circuit": {"config": obj(lambda w: w.learned[0]), "params": obj(lambda w: w.learned[1])},
    CD + "make_pair": {"repeat": size(3)},
    CP + "logit_difference": {"logits": _arr(lambda w: __import__("mha_course.lessons.circuits", fromlist=["x"])
                                             .run_with_cache(w.model, w.pair.clean, w.config)[0])},
    "mha_course.lessons.model.induction_score": {"weights": _arr(lambda w: w.weights_by_layer[-1])},
    CP + "patch_heads": {"target": Spec(lambda w: w.pair.clean, "tokens", bound=8),
                         "source": Spec(lambda w: w.pair.corrupt, "tokens", bound=8),
                         "heads": obj(lambda w: [(0, 1)]), "positions": FREE},
    CP + "patching_effect": {"heads": obj(lambda w: [(0, 1)]), "positions": _arr(lambda w: np.arange(8))},
    CP + "path_patching": {"sender": obj(lambda w: (0, 0)), "receiver": obj(lambda w: (1, 1))},
    CP + "ablate_heads": {"heads": obj(lambda w: [(0, 1)])},
    CP + "ablation_losses": {"heads_sets": obj(lambda w: [[(0, 1)], [(1, 0)]]),
                             "reference": Spec(lambda w: w.tokens, "tokens", bound=8)},
    CR + "formation_step": {"trajectory": obj(lambda w: next(iter(w.trajectories.values())))},
    "mha_course.lessons.complexity.score_memory_bytes": {"B": size(1)},
    LC + "load_scheme": {"name": option("rope", ("rope", "alibi"))},
    LC + "stream_position_losses": {"positions": option("absolute", ("absolute", "cache")), "window": size(8)},
    LC + "format_table": {"lengths": _arr(lambda w: np.array([16, 32]))},
    LS + "serve": {"block_size": size(2)},
    LS + "split_kv_threaded": {"mask": Spec(lambda w: mc.causal_mask(T), "mask")},
    LS + "PagedSequence": {"pool": obj(lambda w: __import__("mha_course.lessons.long_context", fromlist=["x"])
                                       .PagedKVCache(8, 2, 1, 4).sequence(0).pool), "seq": _fixed(0)},
    "mha_course.lessons.misconceptions.ablated_metrics": {"heads": obj(lambda w: [(0, 1)])},
    "mha_course.lessons.misconceptions.keep_only": {"keep": obj(lambda w: {0: 1})},
    "mha_course.lessons.misconceptions.ensemble_metrics": {"members": obj(lambda w: [(w.config, w.model)] * 2)},
    "mha_course.lessons.misconceptions.ensemble_verdict": {"joint": obj(lambda w: [(w.config, w.model)]),
                                                          "members": obj(lambda w: [(w.config, w.model)] * 2),
                                                          "n": size(8)},
    "mha_course.lessons.misconceptions.head_contributions": {"tr": obj(lambda w: w.trace),
                                                             "W_o": _arr(lambda w: w.mha_params.W_o)},
    "mha_course.lessons.misconceptions.rnn_scan": {"W_x": _arr(lambda w: _rng(23).normal(size=(D, D)) * 0.3),
                                                   "W_h": _arr(lambda w: _rng(24).normal(size=(D, D)) * 0.3)},
    "mha_course.lessons.misconceptions.rank_correlation": {"a": _arr(lambda w: np.array([1.0, 3.0, 2.0, 5.0])),
                                                          "b": _arr(lambda w: np.array([2.0, 3.0, 1.0, 4.0]))},
    "mha_course.lessons.training.adam_step": {"params": obj(lambda w: w.learned[1]), "grads": obj(
        lambda w: w.learned[1]), "state": obj(
        lambda w: __import__("mha_course.lessons.training", fromlist=["x"]).adam_init(w.learned[1]))},
    LC + "QuantizedKVCache": {"batch": size(1)},
    "mha_course.lessons.training.adam_init": {"params": MODEL},
    "mha_course.lessons.training.layer_norm_backward": {"grad_y": _arr(lambda w: w.x * 0.5)},
    "mha_course.lessons.checkpoints.npz_bytes": {"arrays": obj(lambda w: {"a": np.arange(3.0)})},
    "mha_course.lessons.checkpoints.check_arrays": {"arrays": obj(lambda w: {"a": np.arange(3.0)})},
    "mha_course.lessons.checkpoints.write_npz": {"arrays": obj(lambda w: {"a": np.arange(3.0)}),
                                                 "path": Spec(lambda w: w.scratch / "attack.npz", "free")},
    "mha_course.lessons.checkpoints.load_checkpoint": {"path": obj(lambda w: mc.__path__[0] + "/checkpoints/induction.npz")},
    "mha_course.lessons.checkpoints.read_npz": {"path": obj(lambda w: mc.__path__[0] + "/checkpoints/induction.npz")},
    "mha_course.lessons.model.forward": {"patch": FREE},
    "mha_course.lessons.model.make_batch": {"batch": size(1)},
    WH + "head_writes": {"x": _arr(lambda w: w.x), "params": obj(lambda w: w.mha_params),
                         "weights": _arr(lambda w: mc.multi_head_attention(w.x, w.mha_params, H)[1])},
    "mha_course.lessons.qkv.embed": {"tokens": _fixed(["the", "cat"]), "vocab": _fixed(["cat", "the"]),
                                     "table": _arr(lambda w: _rng(25).normal(size=(2, D)))},
    "mha_course.lessons.qkv.vocabulary": {"tokens": _fixed(["the", "cat", "the"])},
    "mha_course.lessons.qkv.sentence_trace": {"tokens": _fixed(["the", "cat", "sat"])},
    "mha_course.lessons.qkv.diagonal_curve": {"X": _arr(lambda w: w.x), "strengths": _arr(
        lambda w: np.array([0.0, 0.5, 1.0]))},
    "mha_course.lessons.quiz.choice_value": {"choice": _fixed({"expr": "3 * 8 ** 2"})},
    # any int, bool, string, shape or list is a quiz value: the attacks on "value" are valid values
    "mha_course.lessons.quiz.format_value": {"value": Spec(lambda w: 1234, "free")},
    "mha_course.lessons.quiz.choice_index": {"choice": index(0, 2), "question": QUESTION_2},
    "mha_course.lessons.quiz.grade": {"choice": index(0, 2), "question": QUESTION_2},
    "mha_course.lessons.quiz.section_anchor": {"notebook": obj(lambda w: NOTEBOOKS / "01_qkv.ipynb"),
                                               "section": _fixed("1")},
    "mha_course.lessons.quiz.interview_markdown": {"notebooks_dir": obj(lambda w: NOTEBOOKS),
                                                   "questions": obj(lambda w: w.questions[:3])},
    "mha_course.lessons.seeds.separated": {"a": _arr(lambda w: np.array([0.9, 0.95, 0.92])),
                                           "b": _arr(lambda w: np.array([0.5, 0.6, 0.55]))},
    "mha_course.lessons.seeds.format_values": {"values": _arr(lambda w: np.array([[0.5, 1.0], [0.7, 1.0]])),
                                               "names": obj(lambda w: ["a", "b"]), "header": _fixed("accuracy", "free")},
    "mha_course.lessons.long_seeds.at_length_scaling": {"name": option("rope + dynamic ntk", (
        "rope", "rope + linear", "rope + dynamic ntk"))},
    "mha_course.lessons.long_seeds.format_summary": {
        "table": _arr(lambda w: _rng(31).uniform(size=(3, 2, len(__import__(
            "mha_course.lessons.long_context", fromlist=["x"]).LENGTHS), 2))),
        "names": obj(lambda w: ["a", "b"]), "column": index(0, 2)},
    "mha_course.lessons.quiz.score": {"answers": obj(lambda w: {w.questions[0].id: 0})},
    VW + "attention.weights_bars": {"raw": _arr(lambda w: w.weights[0, 0, -1]),
                                    "scaled": _arr(lambda w: w.weights[0, 1, -1])},
    VW + "attention.split_sources_heatmaps": {"positions": _arr(lambda w: np.zeros((H, T, DK), int)),
                                              "features": _arr(lambda w: np.zeros((H, T, DK), int))},
    VW + "cost.flop_curves": {"projection": _arr(lambda w: np.array([10.0, 20.0, 40.0])),
                                   "attention": _arr(lambda w: np.array([1.0, 4.0, 16.0]))},
    VW + "cost.score_memory_bars": {"hs": _arr(lambda w: np.array([1, 2, 4])),
                                         "nbytes": _arr(lambda w: np.array([64.0, 128.0, 256.0]))},
    VW + "cost.timing_loglog": {"seconds": _arr(lambda w: np.array([1e-3, 2e-3, 4e-3]))},
    VW + "attention.matrix_heatmap": {"values": _arr(lambda w: _rng(26).normal(size=(T, D)))},
    VW + "circuits.circuit_heatmap": {"row_labels": _fixed(list("abc"), "free"), "col_labels": _fixed(list("abc"), "free")},
    VW + "circuits.position_patching_figure": {"effects": _arr(lambda w: _rng(27).uniform(size=(2, H, 8)))},
    VW + "circuits.ablation_figure": {"losses": obj(lambda w: {"zero": np.array([0.1, 0.2])}),
                                      "labels": _fixed(["L0H1", "L1H0"], "free")},
    VW + "circuits.ranking_table": {"measures": obj(lambda w: {"a": np.array([[0.1, 0.2], [0.3, 0.4]])})},
    VW + "circuits.rollout_figure": {n: _arr(lambda w: np.full(8, 0.125))
                                     for n in ("rollout_row", "last_layer_row", "occlusion")},
    VW + "circuits.scores_table": {"scores": obj(lambda w: {"previous_token": np.array([[0.1, 0.2], [0.3, 0.4]])})},
    VW + "circuits.composition_figure": {"scores": obj(lambda w: {k: np.full((H, H), 0.2) for k in "QKV"})},
    VW + "circuits.head_bars": {"values": _arr(lambda w: np.array([[0.1, 0.2], [0.3, 0.4]]))},
    VW + "circuits.pattern_figure": {"weights": _arr(lambda w: w.weights_by_layer[0][0]), "head": index(1, H)},
    VW + "circuits.text_color": {"rgba": _arr(lambda w: np.array([0.2, 0.4, 0.6, 1.0]))},
    VW + "diagram.lit": {"stage": option("scores", ("scores",))},
    VW + "diagram.shape_text": {"shape": _fixed((1, 2))},
    VW + "efficient.measured_curves": {"series": obj(lambda w: {"a": np.array([1.0, 2.0, 4.0, 8.0])}),
                                       "xlabel": _fixed("T", "free")},
    VW + "long_context.stream_loss_curves": {"curves": obj(lambda w: {"a": np.linspace(1.0, 2.0, 8)})},
    VW + "long_context.sink_weight_bars": {"weights": obj(lambda w: {"rope": np.full((2, H), 0.3)})},
    VW + "long_context.length_view": {"model": obj(lambda w: w.long_models["rope"])},
    # the model's vocabulary, so an id past it is refused (the views alone cannot know it)
    **{VW + f"model.{name}": {"vocab": size(8)} for name in ("model_heatmaps", "snapshot_figure")},
    VW + "model.before_after_figure": {"before": WEIGHTS_1SEQ, "after": WEIGHTS_1SEQ, "vocab": size(8)},
    VW + "model.token_labels": {"T": size(8), "vocab": size(8)},
    VW + "long_context.paged_memory_bars": {"lengths": _arr(lambda w: np.array([3, 4]))},
    VW + "model.loss_curves": {"curves": obj(lambda w: {"a": np.linspace(2.0, 1.0, 20)})},
    VW + "model.h_sweep_figure": {"results": obj(lambda w: __import__(
        "mha_course.lessons.checkpoints", fromlist=["x"]).load_experiments())},
    VW + "model.ablation_figure": {"labels": _fixed(["a", "b"], "free"),
                                   "loss_increase": _arr(lambda w: np.array([0.1, 0.2])),
                                   "sharpness": _arr(lambda w: np.array([0.5, 0.9]))},
    VW + "positions.mask_gallery": {"masks": obj(lambda w: {"causal": mc.causal_mask(T)})},
    VW + "positions.mask_heatmap": {"q_tokens": _fixed(list("abcd"), "free"), "k_tokens": _fixed(list("abcd"), "free")},
    VW + "positions.leak_heatmap": {"report": obj(lambda w: mc.leak_probe(lambda x: x, T, rng=_rng(28)))},
    VW + "positions.patch_attention": {"weights": _arr(lambda w: np.full(4, 0.25))},
    VW + "stages.present_stages": {"names": obj(lambda w: w.trace.names)},
    VW + "stages.stage_names": {"names": obj(lambda w: w.trace.names)},
    VW + "stages.flow_inputs": {"name": option("scores", ("scores",)), "names": obj(lambda w: w.trace.names)},
    VW + "style.label_axes": {"ax": obj(lambda w: __import__("matplotlib.pyplot", fromlist=["x"]).subplots()[1]),
                              "rows": _fixed(list("ab"), "free"), "cols": _fixed(list("ab"), "free"),
                              "row_label": _fixed("r", "free"), "col_label": _fixed("c", "free")},
    VW + "style.new_ax": {"ax": _fixed(None, "free")},
    # the checks of views.style name what they check by ``name``: the valid call names the argument attacked
    **{VW + f"style.{name}": {"x": _arr(lambda w: np.array([1e-3, 2e-3])), "name": _fixed("x", "free")}
       for name in ("finite_vector", "log_values")},
    VW + "style.finite_values": {"arr": _arr(lambda w: np.ones((2, 3))), "name": _fixed("arr", "free")},
    VW + "style.known_keys": {"value": obj(lambda w: {"Q": 1}), "valid": _fixed(("Q", "K", "V"), "free"),
                              "name": _fixed("value", "free"), "required": _fixed(("Q",), "free")},
    # any head index or position >= 0 has a colour (the palettes repeat): no upper bound to attack
    VW + "style.head_color": {"i": count(1)},
    VW + "attention.token_color": {"t": count(1)},
    "mha_course.widgets.controls.LiveView": {"draw": _fixed(lambda **k: None, "free"), "controls": obj(
        lambda w: __import__("mha_course.widgets.controls", fromlist=["x"]).SizeControls())},
    "mha_course.widgets.controls.OptionControls": {"name": _fixed("d_k", "free"), "options": obj(lambda w: (1, 2, 4))},
    "mha_course.widgets.controls.option_live_view": {"draw": _fixed(lambda **k: None, "free"),
                                                     "name": _fixed("d_k", "free"), "options": obj(lambda w: (1, 2, 4))},
    "mha_course.widgets.controls.live_view": {"draw": _fixed(lambda **k: None, "free")},
    "mha_course.widgets.controls.distinct_options": {"options": obj(lambda w: [1, 2, 4]), "name": _fixed("options", "free")},
    "mha_course.views.gqa.decode_times_figure": {"positions": _arr(lambda w: np.arange(20)), "with_cache": _arr(
        lambda w: np.full(20, 1e-3)), "without_cache": _arr(lambda w: np.linspace(1e-3, 1e-2, 20))},
}

# Callables not attacked here, each with the tests that cover it (they write files or train for minutes).
_TRAINS = "trains a model for seconds to minutes: tests/lessons and the notebook that runs it cover it"
_WRITES = "writes the package's shipped files: tests/lessons cover it on a temporary path"
EXEMPT: dict[str, str] = {
    "mha_course.lessons.circuits_runs.trajectory_arrays": _TRAINS,
    "mha_course.lessons.circuits_runs.train_trajectory": _TRAINS,
    "mha_course.lessons.circuits_runs.seed_results": _TRAINS,
    "mha_course.lessons.circuits_runs.save_trajectories": _WRITES,
    "mha_course.lessons.misconceptions.make_ensemble": _WRITES,
    "mha_course.lessons.misconceptions.make_joint_models": _WRITES,
    "mha_course.lessons.training.train": _TRAINS,
    "mha_course.lessons.long_seeds.fine_tune": _TRAINS,
    "mha_course.lessons.long_seeds.fine_tunes": _TRAINS,
    "mha_course.lessons.long_seeds.fix_models": _TRAINS,
    "mha_course.lessons.long_seeds.base_models": _TRAINS,
    "mha_course.lessons.long_seeds.run_seed": _TRAINS,
    "mha_course.lessons.long_seeds.results": _TRAINS,
    "mha_course.lessons.long_seeds.evaluate_models": "evaluates several models at 3 lengths: tests/lessons cover it",
    "mha_course.lessons.long_seeds.evaluate_fixes": "evaluates every fix at 3 lengths: tests/lessons cover it",
    "mha_course.lessons.long_seeds.evaluate_streams": "decodes long streams: tests/lessons cover it",
    "mha_course.lessons.long_seeds.evaluate_quantized": "decodes 256 sequences at 6 precisions: tests/lessons cover it",
    "mha_course.lessons.long_seeds.evaluate_head_distance": "reads 128 sequences at 3 lengths: tests/lessons cover it",
    "mha_course.lessons.checkpoints.train_checkpoint": _TRAINS,
    "mha_course.lessons.checkpoints.make_checkpoint": _WRITES,
    "mha_course.lessons.checkpoints.run_experiments": _TRAINS,
    "mha_course.lessons.checkpoints.save_experiments": _WRITES,
    "mha_course.lessons.checkpoints.save_checkpoint": _WRITES,
    "mha_course.lessons.complexity.time_sweep": "times attention: a timing is no contract; tests/lessons cover it",
    "mha_course.lessons.gqa.seconds_per_token": "times decoding: tests/lessons cover it",
    "mha_course.lessons.gqa.step_seconds": "times decoding: tests/lessons cover it",
}
