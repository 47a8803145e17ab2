from slugify import slugify


def test_lowercases_a_single_word():
    assert slugify("Hello") == "hello"


def test_joins_words_with_dashes():
    assert slugify("hello world") == "hello-world"


def test_custom_separator():
    assert slugify("a b c", separator="_") == "a_b_c"
