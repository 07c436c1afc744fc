"""Tools for examples/refund_agent.sd: `issue_refund` moves money, so every call of it
waits for a person's decision (`@struckdown.needs_approval`; the template's
`approve=issue_refund` says the same). `lookup_order` only reads.

    sd run examples/refund_agent.sd --context examples/refund_agent.json --tools examples/refund_tools.py
    sd run … --pause-to refund.state.json      # exits 4, awaiting approval
    sd resume refund.state.json --tools examples/refund_tools.py --approve reply.1
"""

from __future__ import annotations

import struckdown

ORDERS = {
    "5531": {"customer": "C-1042", "status": "delivered", "damaged": True, "amount": 49.0},
    "7710": {"customer": "C-2000", "status": "shipped", "damaged": False, "amount": 12.5},
}


@struckdown.readonly
def lookup_order(order_id: str) -> dict:
    """Look up an order by its id: customer, status, whether it arrived damaged, amount."""
    order = ORDERS.get(order_id)
    if order is None:
        raise KeyError(f"no order {order_id}")
    return order


@struckdown.needs_approval
def issue_refund(order_id: str, amount: float) -> str:
    """Refund an order. Irreversible: only for eligible orders."""
    if order_id not in ORDERS:
        raise KeyError(f"no order {order_id}")
    return f"refunded {amount:.2f} for order {order_id}"
