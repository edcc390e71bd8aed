"""Carts saved to and loaded from JSON files."""

import json
from pathlib import Path

from shop.cart import Cart

DEFAULT_PATH = Path("~/.shop/cart.json")


def save_cart(cart: Cart, path: Path = DEFAULT_PATH) -> None:
    path = path.expanduser()
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {"code": cart.code, "lines": {sku: list(line) for sku, line in cart.lines.items()}}
    path.write_text(json.dumps(data))


def load_cart(path: Path = DEFAULT_PATH) -> Cart:
    data = json.loads(path.expanduser().read_text())
    cart = Cart(data.get("code"))
    for sku, (price, qty) in data["lines"].items():
        cart.lines[sku] = (price, qty)
    return cart
