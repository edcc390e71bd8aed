"""What shipping costs."""

BASE_COST = 4.99
PER_KG = 1.50
FREE_OVER = 100.0


def shipping_cost(weight_kg: float, order_total: float, express: bool = False) -> float:
    if order_total >= FREE_OVER:
        return 0.0
    cost = BASE_COST + PER_KG * max(weight_kg - 2.0, 0.0)
    if express:
        cost *= 2
    return round(cost, 2)
