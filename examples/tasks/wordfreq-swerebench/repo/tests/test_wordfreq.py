from wordfreq import top_words, words


def test_splits_on_punctuation_and_spaces():
    assert words("one, two;three") == ["one", "two", "three"]


def test_counts_repeated_words():
    assert top_words("a b a c a b", n=2) == [("a", 3), ("b", 2)]


def test_limits_to_n():
    assert len(top_words("x y z w", n=2)) == 2
