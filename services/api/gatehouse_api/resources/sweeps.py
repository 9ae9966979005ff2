"""Carts, price lists and RFQs (admin token or a staff user's key).

Their moves in time — a cart abandoned, a price list activated or expired, an
RFQ expired — are never made here: each is a sweep, a job on the workers
(gatehouse.sweeps). While a module (carts, price_lists, rfq) is off its routes
answer MODULE_DISABLED (gatehouse_api.resources.modules).
"""

from __future__ import annotations

import uuid

import falcon

from gatehouse.sweeps.handlers import SweepHandlers
from gatehouse.sweeps.store import SweepStore
from gatehouse.sweeps.tables import CartRecord, PriceListRecord, RfqRecord
from gatehouse_api.auth import principal, require_admin
from gatehouse_api.body import read_json
from gatehouse_api.openapi import contract
from gatehouse_api.schemas import (
    CartView,
    CreateCart,
    CreatePriceList,
    CreateRfq,
    PatchCart,
    PriceListView,
    RfqView,
)


def cart_view(c: CartRecord) -> dict:
    return CartView(
        cartId=c.id,
        customerRef=c.customer_ref,
        status=c.status,
        items=c.items,
        createdAt=c.created_at,
        updatedAt=c.updated_at,
    ).model_dump(mode="json")


def price_list_view(p: PriceListRecord) -> dict:
    return PriceListView(
        priceListId=p.id,
        name=p.name,
        status=p.status,
        validFrom=p.valid_from,
        validTo=p.valid_to,
        createdAt=p.created_at,
        updatedAt=p.updated_at,
    ).model_dump(mode="json")


def rfq_view(r: RfqRecord) -> dict:
    return RfqView(
        rfqId=r.id,
        customerRef=r.customer_ref,
        status=r.status,
        expiresAt=r.expires_at,
        createdAt=r.created_at,
        updatedAt=r.updated_at,
    ).model_dump(mode="json")


class _Resource:
    def __init__(self, store: SweepStore, handlers: SweepHandlers, *, max_body_bytes: int) -> None:
        self.store, self.handlers, self.max_body_bytes = store, handlers, max_body_bytes

    def _body(self, req: falcon.Request, model):
        require_admin(req)
        return read_json(req, model, max_bytes=self.max_body_bytes)


class Carts(_Resource):
    @contract(
        "Create an open cart",
        (201, CartView, "created"),
        (400, 401, 403, 404, 409, 413, 415, 422),
        body=(CreateCart, True),
    )
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = self._body(req, CreateCart)
        cart = self.handlers.create_cart(body.customerRef, [i.model_dump() for i in body.items])
        resp.status = 201
        resp.location = f"/v1/admin/carts/{cart.id}"
        resp.media = cart_view(cart)


class Cart(_Resource):
    @contract("Read a cart", (200, CartView, "the cart"), (401, 403, 404, 409))
    def on_get(self, req: falcon.Request, resp: falcon.Response, cart_id: uuid.UUID) -> None:
        require_admin(req)
        resp.media = cart_view(self.store.get_cart(cart_id))

    @contract(
        "Replace a cart's items (touches updatedAt; an abandoned cart is open again)",
        (200, CartView, "the cart as changed"),
        (400, 401, 403, 404, 409, 413, 415, 422),
        body=(PatchCart, True),
    )
    def on_patch(self, req: falcon.Request, resp: falcon.Response, cart_id: uuid.UUID) -> None:
        body = self._body(req, PatchCart)
        items = [i.model_dump() for i in body.items]
        resp.media = cart_view(self.handlers.set_cart_items(cart_id, items, actor=principal(req).actor))


class PriceLists(_Resource):
    @contract(
        "Create a price list (scheduled, active or expired by its times)",
        (201, PriceListView, "created"),
        (400, 401, 403, 404, 409, 413, 415, 422),
        body=(CreatePriceList, True),
    )
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = self._body(req, CreatePriceList)
        price_list = self.handlers.create_price_list(body.name, body.validFrom, body.validTo)
        resp.status = 201
        resp.location = f"/v1/admin/price-lists/{price_list.id}"
        resp.media = price_list_view(price_list)


class PriceList(_Resource):
    @contract("Read a price list", (200, PriceListView, "the price list"), (401, 403, 404, 409))
    def on_get(self, req: falcon.Request, resp: falcon.Response, price_list_id: uuid.UUID) -> None:
        require_admin(req)
        resp.media = price_list_view(self.store.get_price_list(price_list_id))


class Rfqs(_Resource):
    @contract(
        "Create a request for quotation (open until expiresAt)",
        (201, RfqView, "created"),
        (400, 401, 403, 404, 409, 413, 415, 422),
        body=(CreateRfq, True),
    )
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = self._body(req, CreateRfq)
        rfq = self.handlers.create_rfq(body.customerRef, body.expiresAt)
        resp.status = 201
        resp.location = f"/v1/admin/rfqs/{rfq.id}"
        resp.media = rfq_view(rfq)


class Rfq(_Resource):
    @contract("Read an RFQ", (200, RfqView, "the RFQ"), (401, 403, 404, 409))
    def on_get(self, req: falcon.Request, resp: falcon.Response, rfq_id: uuid.UUID) -> None:
        require_admin(req)
        resp.media = rfq_view(self.store.get_rfq(rfq_id))
