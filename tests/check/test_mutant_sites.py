"""The sites of the mutation generator: every category it promises is found, and a change is undone exactly."""
import ast

from mha_course.check.mutant_sites import Sites, apply_change, code_text, parents_of
from mha_course.check.mutants import CATEGORIES, DIAGNOSIS_ONLY

SOURCE = '''
def ref(x, mask, k: int):
    s = np.where(mask, x, -np.inf) / np.sqrt(k)
    w = np.exp(s - s.max(axis=-1, keepdims=True)).T
    i = np.flatnonzero(mask)[0]
    n, m = x.shape
    w = w[1:n - i] + x[:, k]
    k = (k + i) // 2 * k
    return np.floor(w.sum(axis=-1)[::-1][i + 1] * 2) if k < 3 else abs(w).sum()
'''


def sites():
    tree = ast.parse(SOURCE).body[0]
    return tree, Sites(tree, {"np": ast}).walk()  # any module stands for numpy: only its type is read


def test_the_sites_cover_the_categories_and_only_known_ones():
    _, found = sites()
    categories = {c for c, *_ in found}
    assert categories <= set(CATEGORIES)
    assert set(CATEGORIES) - categories == {"mask-after-softmax"} | DIAGNOSIS_ONLY  # a softmax of masked scores
    extended = {c for c, *_ in Sites(ast.parse(SOURCE).body[0], {"np": ast}, extended=True).walk()}
    assert DIAGNOSIS_ONLY <= extended


def test_each_change_is_undone_exactly():
    tree, found = sites()
    before = ast.dump(tree)
    parents = parents_of(tree)
    for _, slot, new, _ in found:
        undo, was, now = apply_change(slot, new, parents)
        assert was != now or was == ""
        undo()
        assert ast.dump(tree) == before


def test_code_text_writes_numpy_as_np():
    call = ast.parse("__import__('numpy').sqrt(x)", mode="eval").body
    assert code_text(call) == "np.sqrt(x)"


def test_the_extended_sites_are_only_the_diagnosis_slips():
    def ops(sites):
        return {(dict(p).get("from"), dict(p).get("to")) for c, _, _, p in sites if c == "operator"}

    def moved(sites):
        return [p for c, _, _, p in sites if c == "comparison" and dict(p).get("by")]
    plain = Sites(ast.parse(SOURCE).body[0], {"np": ast}).walk()
    extended = Sites(ast.parse(SOURCE).body[0], {"np": ast}, extended=True).walk()
    assert ("*", "+") in ops(extended) and ("*", "+") not in ops(plain)
    assert moved(extended) and not moved(plain)


def test_the_diagnosis_only_sites_change_what_their_sentence_says():
    tree = ast.parse("def f(a, b, n):\n    a[:, n] = b[:, n] / (n // 2)\n    return np.concatenate([a, b]) * 10000.0").body[0]
    found = Sites(tree, {"np": ast}, extended=True).walk()
    parents = parents_of(tree)
    said = set()
    for category, slot, new, params in found:
        undo, was, now = apply_change(slot, new, parents)
        said.add((category, was, now))
        undo()
    assert ("subscript", "a[:, n] = b[:, n] / (n // 2)", "a[n] = b[n] / (n // 2)") in said
    assert ("subscript", "a[:, n] = b[:, n] / (n // 2)", "a[0, n] = b[0, n] / (n // 2)") in said
    assert ("replaced-name", "b[:, n]", "a[:, n]") in said
    assert ("swapped-arguments", "[a, b]", "[b, a]") in said
    assert ("dropped-term", "b[:, n] / (n // 2)", "n // 2") in said
    assert any(c == "constant" and now.endswith("* 1000.0") for c, _, now in said)
    plain = {c for c, *_ in Sites(tree, {"np": ast}).walk()}
    assert not plain & DIAGNOSIS_ONLY


def test_the_diagnosis_slips_of_ranges_axes_and_roots():
    tree = ast.parse("def f(x, n, axis):\n    return x.sum(axis=axis) * np.arange(1, n + 1) / np.sqrt(n) * -8.0").body[0]
    found = Sites(tree, {"np": ast}, extended=True).walk()
    parents = parents_of(tree)
    said = set()
    for category, slot, new, params in found:
        undo, was, now = apply_change(slot, new, parents)
        said.add((category, now))
        undo()
    texts = {now for _, now in said}
    assert ("index", "np.arange(0, n)") in said and ("index", "np.arange(2, n + 1 + 1)") in said  # 0..n-1, 2..n+1
    assert any("x.sum(axis=0)" in t for t in texts) and any("x.sum(axis=-1)" in t for t in texts)
    assert any("np.sqrt(np.sqrt(n))" in t for t in texts)
    assert any(t.endswith("* -1.0") for t in texts)
