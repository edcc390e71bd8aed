"""A shopping cart: items and quantities, with a limit on how many lines it holds."""

from shop.pricing import apply_discount, price_with_tax

MAX_LINES = 50


class CartFull(Exception):
    pass


class Cart:
    def __init__(self, code: str | None = None) -> None:
        self.lines: dict[str, tuple[float, int]] = {}
        self.code = code

    def add(self, sku: str, price: float, qty: int = 1) -> None:
        if qty <= 0:
            raise ValueError("quantity must be positive")
        if sku not in self.lines and len(self.lines) >= MAX_LINES:
            raise CartFull(f"a cart holds at most {MAX_LINES} lines")
        old = self.lines.get(sku, (price, 0))[1]
        self.lines[sku] = (price, old + qty)

    def remove(self, sku: str) -> None:
        self.lines.pop(sku, None)

    def subtotal(self) -> float:
        return sum(price * qty for price, qty in self.lines.values())

    def total(self) -> float:
        return price_with_tax(apply_discount(self.subtotal(), self.code))
