"""A small shop: prices, carts, stock, shipping and saved carts (the fixed repository of `waferline eval-chat`)."""
