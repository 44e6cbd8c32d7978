"""The built-in English→Chinese corpus: exact renderings, gold links, determinism."""

from rnnsearch.tools.apple_corpus import example_pairs, generate


def test_the_two_example_pairs_and_their_gold_links():
    first, second = example_pairs()
    assert " ".join(first.src) == "i ate an apple yesterday ."
    assert " ".join(first.tgt) == "我 昨天 吃 了 一 个 苹果 。"
    assert first.pharaoh() == "0-0 1-2 1-3-P 2-4 2-5-P 3-5-P 3-6 4-1 4-3-P 5-7"
    assert " ".join(second.src) == "she read two new books in the library last week ."
    assert " ".join(second.tgt) == "她 上 个 星期 在 图书馆 读 了 两 本 新 书 。"
    sure = {(second.src[i], second.tgt[j]) for i, j in second.sure}
    assert sure == {("she", "她"), ("last", "上"), ("week", "星期"), ("in", "在"), ("library", "图书馆"),
                    ("read", "读"), ("two", "两"), ("new", "新"), ("books", "书"), (".", "。")}
    possible = {(second.src[i], second.tgt[j]) for i, j in second.possible - second.sure}
    assert possible == {("last", "个"), ("week", "个"), ("the", "图书馆"), ("read", "了"), ("last", "了"),
                        ("week", "了"), ("books", "本"), ("two", "本")}
    assert second.roles[second.tgt.index("了")] == "function"
    assert second.roles[second.tgt.index("书")] == "content"
    assert second.roles[-1] == "punct"


def test_generation_is_deterministic_in_the_seed_and_distinct():
    a = generate(300, seed=5, max_clauses=3)
    b = generate(300, seed=5, max_clauses=3)
    c = generate(300, seed=6, max_clauses=3)
    assert [p.src for p in a] == [p.src for p in b] and [p.pharaoh() for p in a] == [p.pharaoh() for p in b]
    assert [p.src for p in a] != [p.src for p in c]
    assert len({" ".join(p.src) for p in a}) == 300
    excluded = {" ".join(p.src) for p in a[:50]}
    assert not excluded & {" ".join(p.src) for p in generate(300, seed=5, max_clauses=3, exclude=excluded)}


def test_structure_of_every_pair():
    for p in generate(400, seed=1, min_clauses=1, max_clauses=5):
        assert p.src[-1] == "." and p.tgt[-1] == "。"
        assert p.src.count("and") == p.tgt.count("，")
        assert p.sure <= p.possible
        assert all(0 <= i < len(p.src) and 0 <= j < len(p.tgt) for i, j in p.possible)
        assert len(p.roles) == len(p.tgt)
        # every content word has exactly one sure source word
        for j, role in enumerate(p.roles):
            if role == "content":
                assert len({i for i, jj in p.sure if jj == j}) == 1, (p.src, p.tgt, j)
        # 了 follows every verb and links only as "possible"
        for j, w in enumerate(p.tgt):
            if w == "了":
                assert not any(jj == j for _, jj in p.sure)
                assert any(jj == j for _, jj in p.possible)
    lengths = [len(p.src) for p in generate(2000, seed=2, min_clauses=5, max_clauses=5)]
    assert max(lengths) >= 50  # long enough for the length experiments
