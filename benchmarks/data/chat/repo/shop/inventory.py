"""Stock levels per SKU."""


class OutOfStock(Exception):
    pass


class Inventory:
    def __init__(self) -> None:
        self.stock: dict[str, int] = {}

    def restock(self, sku: str, qty: int) -> None:
        self.stock[sku] = self.stock.get(sku, 0) + qty

    def reserve(self, sku: str, qty: int) -> None:
        have = self.stock.get(sku, 0)
        if have < qty:
            raise OutOfStock(f"{sku}: {have} left, {qty} wanted")
        self.stock[sku] = have - qty

    def low_stock(self, threshold: int = 5) -> list[str]:
        return sorted(sku for sku, n in self.stock.items() if n < threshold)
