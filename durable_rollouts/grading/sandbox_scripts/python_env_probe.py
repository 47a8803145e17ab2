"""Run by the grader with each Python of a fresh grading sandbox, before the agent's diff is applied:
``python python_env_probe.py WORKDIR``. Prints one JSON object: what that interpreter imports from outside
the workdir (``names``: top-level modules and packages a same-named file in the workdir would shadow), the
pytest plugins its distributions register (``plugins``: [distribution, entry point name, value]),
the directories inside the workdir on its ``sys.path`` without a runner putting them there (``workdir_paths``),
and its site-packages directories outside the workdir (``site_dirs``).

Runs in the image's own Python, whatever its version (3.6 and later): standard library only.
"""

import json
import os
import pkgutil
import site
import sys
import sysconfig


def _inside(path, workdir):
    path = os.path.realpath(path or os.getcwd())
    return path == workdir or path.startswith(workdir + os.sep)


def _names(entries):
    names = set(sys.builtin_module_names) | set(getattr(sys, "stdlib_module_names", ()))
    names.update(module.name for module in pkgutil.iter_modules(entries))
    for entry in entries:
        try:
            children = os.listdir(entry)
        except OSError:
            continue
        names.update(child for child in children if child.isidentifier() and os.path.isdir(os.path.join(entry, child)))
    return sorted(names)


def _entry_points(dist):
    try:
        return [(point.name, point.value) for point in dist.entry_points if point.group == "pytest11"]
    except Exception:
        return []


def _plugins(entries):
    try:
        from importlib import metadata
    except ImportError:
        try:
            import importlib_metadata as metadata
        except ImportError:
            return _legacy_plugins(entries)
    found = []
    for dist in metadata.distributions(path=entries):
        name = (dist.metadata or {}).get("Name") or ""
        found.extend([name, point, value] for point, value in _entry_points(dist))
    return found


def _legacy_plugins(entries):
    try:
        import pkg_resources
    except ImportError:
        return []
    found = []
    for entry in entries:
        for dist in pkg_resources.find_distributions(entry):
            found.extend(
                [dist.project_name, point.name, str(point).split("=", 1)[1].strip()]
                for point in dist.get_entry_map("pytest11").values()
            )
    return found


def _site_dirs(workdir):
    found = list(getattr(site, "getsitepackages", list)())
    found.append(sysconfig.get_paths().get("purelib", ""))
    dirs = [os.path.realpath(path) for path in found if path and os.path.isdir(path)]
    return sorted({path for path in dirs if not _inside(path, workdir)})


def main(workdir):
    workdir = os.path.realpath(workdir)
    search = sys.path[1:]
    outside = [entry for entry in search if entry and not _inside(entry, workdir)]
    result = {
        "names": _names(outside),
        "plugins": _plugins([*search, workdir]),
        "site_dirs": _site_dirs(workdir),
        "workdir_paths": sorted(
            {os.path.relpath(os.path.realpath(entry or "."), workdir) for entry in search if _inside(entry, workdir)}
        ),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1])
