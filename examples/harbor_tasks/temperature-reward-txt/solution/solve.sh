#!/usr/bin/env bash
# Harbor's oracle: fix the conversion in place.
set -e
cd /app
sed -i 's|return fahrenheit - 32 \* 5 / 9|return (fahrenheit - 32) * 5 / 9|' convert.py
