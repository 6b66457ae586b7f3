"""Text colour that stays readable on any fill: black or white by WCAG contrast.

Numbers drawn on coloured cells or bars (the ring's buffer cells, the memory bars) pick
their ink with :func:`ink_on`, so they read on a pale cell and on a dark one alike.

Examples
--------
>>> round(contrast((1, 1, 1), (0, 0, 0)), 1)
21.0
"""

__all__ = ["luminance", "contrast", "ink_on"]


def luminance(colour):
    """Relative luminance of an RGB(A) colour, 0 (black) to 1 (white), as WCAG 2 defines it.

    >>> luminance((1, 1, 1)), luminance((0, 0, 0))
    (1.0, 0.0)
    """
    linear = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in colour[:3]]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def contrast(a, b):
    """WCAG contrast ratio of two colours (1 to 21; 4.5 is the floor for small text)."""
    hi, lo = sorted((luminance(a), luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def ink_on(fill):
    """Black or white, whichever contrasts more with ``fill``: text stays readable on
    every cell, pale or dark.

    >>> ink_on((1, 1, 1)), ink_on((0.0, 0.27, 0.16))
    ('black', 'white')
    """
    return "black" if contrast(fill, (0, 0, 0)) >= contrast(fill, (1, 1, 1)) else "white"
