import os
import threading
from pathlib import Path

from durable_rollouts.folder_loads import MAX_LOADED, load_once
from durable_rollouts.policy.prompt_renderer import PromptRenderer
from durable_rollouts.policy.tokenizer_cache import ensure_qwen_tokenizer
from durable_rollouts.trajectory_view.token_text import TokenTexts


class Loads:
    """A loader that records the folders it was asked to load (a fresh one per test: the loader is part of the key)."""

    def __init__(self) -> None:
        self.folders: list[Path] = []

    def __call__(self, folder: Path) -> object:
        self.folders.append(folder)
        return object()


def test_a_folder_is_loaded_once_until_a_file_in_it_changes(tmp_path):
    (tmp_path / "vocab.json").write_text("{}")
    load = Loads()
    first = load_once(load, tmp_path)
    assert load_once(load, str(tmp_path / "." / "")) is first, "the same folder however it is spelled"
    (tmp_path / "vocab.json").write_text('{"a": 1}')
    rewritten = load_once(load, tmp_path)
    assert rewritten is not first
    (tmp_path / "merges.txt").write_text("")
    added = load_once(load, tmp_path)
    assert added is not rewritten
    os.utime(tmp_path / "merges.txt", ns=(1, 1))
    assert load_once(load, tmp_path) is not added, "touched counts as changed"
    assert load.folders == [tmp_path.resolve()] * 4


def test_another_loader_of_the_same_folder_loads_its_own(tmp_path):
    one, other = Loads(), Loads()
    assert load_once(one, tmp_path) is not load_once(other, tmp_path)
    assert len(one.folders) == len(other.folders) == 1


def test_a_missing_folder_is_handed_to_the_loader_every_time(tmp_path):
    load = Loads()
    load_once(load, tmp_path / "absent")
    load_once(load, tmp_path / "absent")
    assert load.folders == [tmp_path / "absent"] * 2


def test_the_least_recently_asked_folder_leaves_first(tmp_path):
    folders = [tmp_path / str(i) for i in range(MAX_LOADED + 1)]
    for folder in folders:
        folder.mkdir()
    load = Loads()
    first = load_once(load, folders[0])
    for folder in folders[1:MAX_LOADED]:
        load_once(load, folder)
    assert load_once(load, folders[0]) is first, "asked again: now the most recent"
    load_once(load, folders[MAX_LOADED])
    assert load_once(load, folders[0]) is first
    assert len(load.folders) == MAX_LOADED + 1, "the second folder left, not the first"
    load_once(load, folders[1])
    assert len(load.folders) == MAX_LOADED + 2


def test_callers_at_once_share_one_load(tmp_path):
    gate = threading.Event()

    class Slow(Loads):
        def __call__(self, folder: Path) -> object:
            gate.wait(5)
            return super().__call__(folder)

    load = Slow()
    got: list[object] = []
    threads = [threading.Thread(target=lambda: got.append(load_once(load, tmp_path))) for _ in range(4)]
    for thread in threads:
        thread.start()
    gate.set()
    for thread in threads:
        thread.join()
    assert len(load.folders) == 1 and len({id(value) for value in got}) == 1


def test_the_tokenizer_folder_loads_once_for_rendering_and_for_reading_tokens():
    folder = ensure_qwen_tokenizer()
    assert PromptRenderer.from_folder(folder) is PromptRenderer.from_folder(str(folder))
    assert TokenTexts.from_dir(folder) is TokenTexts.from_dir(folder)
