"""A small module the editor tests type into."""


def add(a, b):
    """Return the sum of a and b."""
    return a + b


def scale(values, factor):
    """Multiply each value by factor."""
