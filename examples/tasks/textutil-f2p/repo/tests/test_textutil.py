from textutil import slugify, truncate_words


def test_slugify_simple_word():
    assert slugify("Hello") == "hello"


def test_slugify_two_words():
    assert slugify("hello world") == "hello-world"


def test_truncate_words_short_text():
    assert truncate_words("one two", 5) == "one two"


def test_truncate_words_long_text():
    assert truncate_words("one two three four", 2) == "one two..."
