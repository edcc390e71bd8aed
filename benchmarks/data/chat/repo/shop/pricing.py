"""Prices: discount codes and tax."""

TAX_RATE = 0.2
DISCOUNTS = {"SPRING": 0.10, "VIP": 0.25}


def apply_discount(price: float, code: str | None) -> float:
    """The price after the discount `code` gives; an unknown or missing code leaves the price unchanged."""
    rate = DISCOUNTS.get((code or "").upper(), 0.0)
    return round(price * (1 - rate), 2)


def price_with_tax(price: float) -> float:
    return round(price * (1 + TAX_RATE), 2)
