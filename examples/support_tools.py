"""Tools for examples/support_agent.sd (load with `sd run … --tools examples/support_tools.py`)."""

from __future__ import annotations

import struckdown

ORDERS = {
    "5531": {"customer": "C-1042", "status": "delivered", "damaged": True, "amount": 49.0},
    "7710": {"customer": "C-2000", "status": "shipped", "damaged": False, "amount": 12.5},
}
REFUNDS: list[str] = []


@struckdown.readonly
def lookup_order(order_id: str) -> dict:
    """Look up an order by its id: customer, status, whether it was damaged, amount."""
    order = ORDERS.get(order_id)
    if order is None:
        raise KeyError(f"no order {order_id}")
    return order


def issue_refund(order_id: str, reason: str) -> str:
    """Refund an order in full. Irreversible: only for eligible orders."""
    if order_id not in ORDERS:
        raise KeyError(f"no order {order_id}")
    REFUNDS.append(order_id)
    return f"refunded {ORDERS[order_id]['amount']:.2f} for order {order_id}"
