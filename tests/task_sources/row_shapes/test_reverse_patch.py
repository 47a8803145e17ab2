"""Reversing a patch, checked with git: the reverse undoes the forward patch, file creations and deletions included."""

import subprocess

from durable_rollouts.task_sources.row_shapes.reverse_patch import reverse_patch

GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]


def git(repo, *args):
    return subprocess.run([*GIT, *args], cwd=repo, check=True, capture_output=True, text=True).stdout


def test_the_reverse_undoes_the_patch(tmp_path):
    git(tmp_path, "init", "-q")
    (tmp_path / "f.txt").write_text("a\nb\nc\n-- header-like\nd\n")
    (tmp_path / "gone.txt").write_text("old\n")
    (tmp_path / "tail.txt").write_text("no newline")
    git(tmp_path, "add", "-A")
    git(tmp_path, "commit", "-qm", "before")
    (tmp_path / "f.txt").write_text("a\nB\nc\nd\ne\n")
    (tmp_path / "gone.txt").unlink()
    (tmp_path / "new.txt").write_text("new\n")
    (tmp_path / "tail.txt").write_text("now with one\n")
    git(tmp_path, "add", "-A")
    forward = git(tmp_path, "diff", "--cached")
    git(tmp_path, "commit", "-qm", "after")
    (tmp_path / "undo.diff").write_text(reverse_patch(forward))
    git(tmp_path, "apply", "--index", "undo.diff")
    assert git(tmp_path, "diff", "--cached", "HEAD~1", "--stat") == ""


def test_a_binary_or_unreadable_patch_has_no_reverse():
    assert reverse_patch("diff --git a/x.png b/x.png\nGIT binary patch\nliteral 3\n") is None
    assert reverse_patch("diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1,3 +1,3 @@\n-a\n+b\n") is None
