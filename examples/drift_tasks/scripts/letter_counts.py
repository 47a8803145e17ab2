"""Count letters, vowels and consonants (ASCII letters only)."""
import string
import sys

text = sys.stdin.read()
letters = [c for c in text.lower() if c in string.ascii_lowercase]
vowels = sum(1 for c in letters if c in "aeiou")
print("letters:", len(letters))
print("vowels:", vowels)
print("consonants:", len(letters) - vowels)
