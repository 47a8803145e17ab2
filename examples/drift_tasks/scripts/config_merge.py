"""Merge the sections of an INI document over its [defaults] section and print the result as JSON."""
import configparser
import json
import sys


def load(text: str) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None, default_section="defaults")
    parser.read_string(text)
    return parser


def resolved(parser: configparser.ConfigParser, section: str) -> dict:
    values = dict(parser.items(section))
    return {key: coerce(value) for key, value in sorted(values.items())}


def coerce(value: str):
    for kind in (int, float):
        try:
            return kind(value)
        except ValueError:
            pass
    return {"true": True, "false": False}.get(value.lower(), value)


parser = load(sys.stdin.read())
merged = {section: resolved(parser, section) for section in parser.sections()}
print(json.dumps(merged, indent=2, sort_keys=True))
print("sections:", len(merged), "defaults:", len(parser.defaults()))
