"""Base-27 numbers as written in IBIp labels (seed 002, Table 7.6)."""

from __future__ import annotations

ALPHABET = "23456789ABCDEFGHJKLMNPQRSTU"
_VALUE = {digit: value for value, digit in enumerate(ALPHABET)}


def encode(number: int) -> str:
    """Write a non-negative integer in base 27 (``1`` -> ``"3"``, ``19050`` -> ``"U5H"``)."""
    if number < 0:
        raise ValueError("base 27 codes non-negative integers only")
    digits = []
    while True:
        number, digit = divmod(number, 27)
        digits.append(ALPHABET[digit])
        if number == 0:
            return "".join(reversed(digits))


def is_digits(text: str) -> bool:
    """Whether ``text`` is a non-empty run of base-27 digits (upper case)."""
    return bool(text) and all(char in _VALUE for char in text)


def decode(text: str) -> int:
    """Read a run of upper-case base-27 digits."""
    if not is_digits(text):
        raise ValueError(f"{text!r} is not written in base 27")
    number = 0
    for char in text:
        number = number * 27 + _VALUE[char]
    return number


def encode_text(text: str, digits: str) -> int:
    """Read ``text`` as a number whose digits, from value 0 upward, are ``digits``.

    This is CONVERTTODECIMAL of Algorithm 5: an IPv4 address is read in base 11 over
    ``0123456789.`` and an IPv6 address in base 17 over ``0123456789abcdef:``.
    """
    base = len(digits)
    number = 0
    for char in text:
        number = number * base + digits.index(char)
    return number


def decode_text(number: int, digits: str) -> str:
    """Inverse of :func:`encode_text` (a leading digit of value 0 cannot come back)."""
    base = len(digits)
    chars = []
    while number:
        number, digit = divmod(number, base)
        chars.append(digits[digit])
    return "".join(reversed(chars))
