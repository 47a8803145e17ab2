"""Write ``corpus.json``: the drift → repair task corpus (scripts in ``scripts/``, inputs below).

Run ``.venv/bin/python examples/drift_tasks/make_corpus.py`` after editing a
script or an input. Expected outputs are what the original script prints for
each input (run through the project's script runner); each task's target
drift category is the least used so far among the categories the seeded
baseline can use on that script, so the corpus covers all of them evenly.
``tests/drift_repair/test_corpus.py`` checks that the file is up to date.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))

from durable_rollouts.drift_repair.baselines import baseline_categories  # noqa: E402
from durable_rollouts.drift_repair.script_runner import LocalScriptRunner  # noqa: E402

VERSIONS = {"python": "3.11"}
CATEGORIES = ["api_rename", "kwarg_change", "import_move", "argument_order", "attribute_change"]

# task id -> (difficulty, visible stdin, held-out stdins)
INPUTS: dict[str, tuple[str, str, list[str]]] = {
    "word_count": (
        "easy",
        "the cat and the hat and the bat\n",
        ["a b a c b a\n", "Red red BLUE green blue red\n", "one two three two three three\n"],
    ),
    "number_stats": ("easy", "3 1 4 1 5 9 2 6\n", ["10 20 30\n", "2.5 -1 7.25 0\n", "100\n"]),
    "json_pretty": (
        "easy",
        '{"b": 1, "a": [1, 2], "c": {"y": true, "x": null}}\n',
        ['{"name": "drift", "size": 3}\n', '{"z": [], "m": {"k": "v"}}\n', '{"only": 1.5}\n'],
    ),
    "reverse_lines": ("easy", "hello\nworld\nabc\n", ["one\ntwo\n", "racecar\nlevel\nrotor\nstats\n", "x\n"]),
    "temperatures": ("easy", "0 100 -40 36.6\n", ["25\n", "-273.15 1000\n", "12.5 13.5 14.5\n"]),
    "letter_counts": ("easy", "Hello, World!\n", ["AEIOU xyz\n", "Drift happens; repair follows.\n", "rhythm\n"]),
    "fizzbuzz": ("easy", "15\n", ["5\n", "20\n", "31\n"]),
    "palindromes": (
        "easy",
        "A man, a plan, a canal: Panama\nhello\nNo lemon, no melon\n",
        ["racecar\n", "Was it a car or a cat I saw?\nabc\n", "12321\n12 3\n"],
    ),
    "hex_numbers": ("easy", "ff 10 7b\n", ["0\n", "dead beef\n", "1 2 a\n"]),
    "weekdays": ("easy", "2024-02-29 2000-01-01\n", ["1999-12-31\n", "2023-06-15 2023-06-16\n", "2030-10-05\n"]),
    "wrap_text": (
        "easy",
        "the quick   brown fox jumps over the lazy dog again and again\n",
        [
            "short text\n",
            "drift happens when libraries move fast and scripts stay still\n",
            "a b c d e f g h i j k l m n o p q r s t u v w x y z\n",
        ],
    ),
    "gcd_lcm": ("easy", "12 18\n", ["7 13\n", "100 75\n", "21 6\n"]),
    "csv_totals": (
        "medium",
        "category,amount\nfood,12.50\nrent,800\nfood,7.25\nfun,30\n",
        [
            "category,amount\na,1\n",
            "category,amount\nx,0.5\ny,0.25\nx,0.25\n",
            "category,amount\nbooks,19.99\nbooks,5.01\ngames,60\n",
        ],
    ),
    "inventory_value": (
        "medium",
        '[{"name": "bolt", "qty": 100, "price": 0.25}, {"name": "nut", "qty": 250, "price": 0.1}, {"name": "gear", '
        '"qty": 3, "price": 12.5}]\n',
        [
            '[{"name": "a", "qty": 1, "price": 1.0}]\n',
            '[{"name": "x", "qty": 2, "price": 3.5}, {"name": "y", "qty": 7, "price": 1.0}]\n',
            '[{"name": "p", "qty": 10, "price": 0.5}, {"name": "q", "qty": 5, "price": 1.0}, {"name": "r", "qty": 1, '
            '"price": 5.0}]\n',
        ],
    ),
    "roman_numerals": ("medium", "1994 4 58\n", ["3999\n", "1 9 14 40\n", "2024 444\n"]),
    "matrix_product": ("medium", "1 2\n3 4\n", ["1 0 0\n0 1 0\n0 0 1\n", "2 3 4\n", "1 -1\n-1 1\n5 5\n"]),
    "log_levels": (
        "medium",
        "10:00:01 INFO started\n10:00:05 WARN disk almost full\n"
        "10:01:00 INFO ok\n10:02:30 ERROR failed to write file\n",
        [
            "09:00:00 INFO a\n",
            "23:59:58 DEBUG tick\n23:59:59 DEBUG tock tock\n",
            "01:00:00 ERROR x\n01:00:01 INFO yy\n01:00:02 ERROR zzz\n",
        ],
    ),
    "account_balance": (
        "medium",
        "alice\ndeposit 100.00\nwithdraw 30.555\ndeposit 0.10\n",
        [
            "bob\ndeposit 1\n",
            "carol\ndeposit 50\nwithdraw 75.5\n",
            "dave\ndeposit 0.005\ndeposit 0.005\nwithdraw 0.001\n",
        ],
    ),
    "city_temperatures": (
        "medium",
        "Oslo, 3.5\nRome, 18\nOslo, -1.5\nRome, 21.25\nLima, 19\n",
        ["Paris, 10\n", "A, 1\nB, 2\nA, 3\nB, 4\n", "Cairo, 35.5\nCairo, 36.5\nQuito, 14\n"],
    ),
    "cart_total": (
        "medium",
        '{"tax_rate": 0.2, "items": [{"price": 10.0, "qty": 2}, {"price": 3.5, "qty": 1}]}\n',
        [
            '{"tax_rate": 0.0, "items": [{"price": 1.0, "qty": 1}]}\n',
            '{"tax_rate": 0.075, "items": [{"price": 19.99, "qty": 3}, {"price": 0.99, "qty": 10}]}\n',
            '{"tax_rate": 0.5, "items": [{"price": 2.0, "qty": 2}, {"price": 4.0, "qty": 1}, {"price": 8.0, "qty": '
            "0}]}\n",
        ],
    ),
    "anagram_groups": (
        "medium",
        "listen silent enlist google elgoog cat act tac dog\n",
        ["abc\n", "Tea eat ate tan nat bat\n", "stop pots tops opts post spot\n"],
    ),
    "run_length": ("medium", "aaabccdddd\nhello\n", ["x\n", "zzzzzzzzzzzz\nabab\n", "aabbaa\nmississippi\n"]),
    "shortest_path": (
        "hard",
        "A E A-B B-C C-E A-D D-E B-E\n",
        ["X Y X-Y\n", "S T S-A A-B B-T S-C C-T\n", "P Q P-R R-S S-Q P-T T-Q R-T\n"],
    ),
    "job_scheduler": (
        "hard",
        "2\nbuild 1 3\ntest 2 2\ndeploy 3 1\nlint 1 1\n",
        ["1\nonly 5 4\n", "3\na 2 2\nb 1 5\nc 3 1\nd 1 1\n", "2\nx 1 1\ny 1 1\nz 1 1\n"],
    ),
    "table_format": (
        "hard",
        "| name | qty | price |\n| bolt | 100 | 0.25 |\n| gear | 3 | 12.50 |\n",
        [
            "| a |\n| 1 |\n",
            "| city | temp |\n| Oslo | 3 |\n| Rome | 18 |\n| Lima | 19 |\n",
            "| x | y | z |\n| 1 | 22 | 333 |\n",
        ],
    ),
    "order_report": (
        "hard",
        '[{"customer": "ann", "amount": "12.50", "date": "2024-01-03"}, {"customer": "bob", "amount": "7", "date": '
        '"2024-02-01"}, {"customer": "ann", "amount": "30", "date": "2024-03-15"}]\n',
        [
            '[{"customer": "zed", "amount": "1", "date": "2020-02-28"}]\n',
            '[{"customer": "a", "amount": "2.5", "date": "2023-12-31"}, {"customer": "a", "amount": "2.5", "date": '
            '"2024-01-01"}]\n',
            '[{"customer": "x", "amount": "10", "date": "2022-05-05"}, {"customer": "y", "amount": "20", "date": '
            '"2022-06-06"}, {"customer": "x", "amount": "5.25", "date": "2022-07-07"}]\n',
        ],
    ),
    "calculator": (
        "hard",
        "1 + 2 * 3\n(1 + 2) * 3\n7 / 2 - 1\n",
        ["2 * (3 + 4) * 5\n", "10 / 4\n100 - 99 - 1\n", "(8 - 2) / (1 + 2) + 1 * 3\n"],
    ),
    "document_similarity": (
        "hard",
        "the cat sat on the mat\nthe dog sat on the log\ncats and dogs are pets\n",
        [
            "a b c\na b d\n",
            "drift breaks code\nrepair fixes code\nrepair fixes broken code quickly\n",
            "one fish two fish\nred fish blue fish\none two red blue\n",
        ],
    ),
    "month_calendar": ("hard", "2024-02 2023-10\n", ["2000-01\n", "2021-02\n", "2026-08 1999-12\n"]),
    "merge_streams": (
        "hard",
        "a: 1 5 9\nb: 2 3 10\nc: 4 20\n",
        ["x: 1 2\ny: 10\n", "p: 5 6 7\nq: 1 2 3\n", "m: 3 30\nn: 4 40\no: 5 50\n"],
    ),
    "config_merge": (
        "hard",
        "[defaults]\ntimeout = 30\ndebug = false\n\n[web]\nport = 8080\ndebug = true\n\n[db]\nhost = localhost\nratio "
        "= 0.75\n",
        [
            "[defaults]\nx = 1\n\n[only]\ny = two\n",
            "[defaults]\nretries = 3\n\n[a]\nretries = 5\n\n[b]\nname = B\n\n[c]\nflag = TRUE\n",
            "[defaults]\nlevel = info\n\n[svc]\nlevel = debug\nworkers = 4\n",
        ],
    ),
    "vending_machine": (
        "hard",
        "cola=150 chips=100\ninsert 100\nselect cola\ninsert 100\nselect cola\ninsert 50\nrefund\n",
        [
            "tea=50\ninsert 50\nselect tea\ninsert 20\nrefund\n",
            "a=10 b=20\ninsert 5\nselect a\ninsert 30\nselect b\ninsert 1\nrefund\n",
            "gum=25\ninsert 10\nselect gum\ninsert 25\nselect gum\ninsert 5\nrefund\n",
        ],
    ),
}


def build() -> list[dict]:
    scripts = {task_id: (HERE / "scripts" / f"{task_id}.py").read_text() for task_id in INPUTS}
    jobs = [(scripts[t], stdin) for t, (_, visible, held_out) in INPUTS.items() for stdin in [visible, *held_out]]
    outputs = iter(LocalScriptRunner().run_many(jobs, timeout_s=10))
    entries = []
    used = dict.fromkeys(CATEGORIES, 0)
    for task_id, (difficulty, visible, held_out) in INPUTS.items():
        runs = [next(outputs) for _ in range(1 + len(held_out))]
        failed = [run for run in runs if not run.ran or run.stderr]
        if failed:
            raise SystemExit(f"{task_id}: the original script does not run cleanly: {failed[0]}")
        usable = [c for c in CATEGORIES if c in baseline_categories(scripts[task_id])]
        category = min(usable, key=lambda c: used[c])
        used[category] += 1
        entries.append(
            {
                "task_id": task_id,
                "difficulty": difficulty,
                "category": category,
                "versions": VERSIONS,
                "file": f"scripts/{task_id}.py",
                "visible": {"stdin": visible, "expected_stdout": runs[0].stdout},
                "held_out": [
                    {"stdin": s, "expected_stdout": r.stdout} for s, r in zip(held_out, runs[1:], strict=True)
                ],
            }
        )
    return entries


def main() -> None:
    (HERE / "corpus.json").write_text(json.dumps(build(), indent=1) + "\n")
    print(f"wrote {HERE / 'corpus.json'} ({len(INPUTS)} tasks)")


if __name__ == "__main__":
    main()
