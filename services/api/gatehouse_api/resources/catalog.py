"""The B2B catalog's admin API: products and attributes (admin token or a staff user's key)."""

from __future__ import annotations

import uuid

import falcon

from gatehouse.catalog import AttributeRecord, NewProduct, Price, ProductPatch, ProductRecord
from gatehouse.catalog.handlers import CatalogHandlers
from gatehouse.catalog.rules import STATUSES
from gatehouse.catalog.store import CatalogStore
from gatehouse_api.auth import principal, require_admin
from gatehouse_api.body import read_json
from gatehouse_api.openapi import contract, page_params, query
from gatehouse_api.paging import choice, decode_cursor, encode_cursor, page_limit
from gatehouse_api.schemas import (
    AttributeList,
    AttributePatched,
    AttributeView,
    CreateAttribute,
    CreateProduct,
    CreateProducts,
    PatchAttribute,
    PatchProduct,
    PriceBody,
    PriceView,
    ProductPage,
    ProductsCreated,
    ProductView,
    ReindexStarted,
)


def product_view(p: ProductRecord) -> dict:
    return ProductView(
        productId=p.id,
        sku=p.sku,
        name=p.name,
        description=p.description,
        price=PriceView(amount=p.price_amount, currency=p.price_currency),
        status=p.status,
        attributes=p.attributes,
        createdAt=p.created_at,
        updatedAt=p.updated_at,
    ).model_dump(mode="json")


def attribute_model(a: AttributeRecord) -> AttributeView:
    return AttributeView(code=a.code, label=a.label, searchable=a.searchable, createdAt=a.created_at)


def attribute_view(a: AttributeRecord) -> dict:
    return attribute_model(a).model_dump(mode="json")


def _price(body: PriceBody) -> Price:
    return Price(amount=body.amount, currency=body.currency)


def new_product(body: CreateProduct) -> NewProduct:
    return NewProduct(
        sku=body.sku,
        name=body.name,
        description=body.description,
        price=_price(body.price),
        status=body.status,
        attributes=dict(body.attributes),
    )


class _Resource:
    def __init__(self, catalog: CatalogStore, handlers: CatalogHandlers, *, max_body_bytes: int) -> None:
        self.catalog, self.handlers, self.max_body_bytes = catalog, handlers, max_body_bytes


class Products(_Resource):
    @contract(
        "Create a product",
        (201, ProductView, "created"),
        (400, 401, 403, 409, 413, 415, 422),
        body=(CreateProduct, True),
    )
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        require_admin(req)
        body = read_json(req, CreateProduct, max_bytes=self.max_body_bytes)
        product = self.handlers.create_product(new_product(body))
        resp.status = 201
        resp.location = f"/v1/admin/catalog/products/{product.id}"
        resp.media = product_view(product)

    @contract(
        "List products, newest first",
        (200, ProductPage, "a page of products"),
        (401, 403, 422),
        params=page_params(query("status", enum=list(STATUSES))),
    )
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        require_admin(req)
        status = choice(req.get_param("status"), "status", STATUSES)
        limit = page_limit(req.get_param("limit"))
        cursor = req.get_param("cursor")
        before = decode_cursor(cursor) if cursor else None
        products = self.catalog.list_products(status=status, limit=limit + 1, before=before)
        page, more = products[:limit], len(products) > limit
        resp.media = ProductPage(
            items=[product_view(p) for p in page], nextCursor=encode_cursor(page[-1]) if more else None
        ).model_dump(mode="json")


class ProductsBatch(_Resource):
    """Up to 1,000 products in one transaction: all are created, or none."""

    @contract(
        "Create up to 1,000 products, all or nothing",
        (201, ProductsCreated, "all created"),
        (400, 401, 403, 409, 413, 415, 422),
        body=(CreateProducts, True),
    )
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        require_admin(req)
        body = read_json(req, CreateProducts, max_bytes=self.max_body_bytes)
        created = self.handlers.create_products([new_product(item) for item in body.items])
        resp.status = 201
        resp.media = ProductsCreated(created=created).model_dump(mode="json")


class Product(_Resource):
    @contract("Read a product", (200, ProductView, "the product"), (401, 403, 404))
    def on_get(self, req: falcon.Request, resp: falcon.Response, product_id: uuid.UUID) -> None:
        require_admin(req)
        resp.media = product_view(self.catalog.get_product(product_id))

    @contract(
        "Edit a product (attributes merge); the change is audited",
        (200, ProductView, "the product as changed"),
        (400, 401, 403, 404, 413, 415, 422),
        body=(PatchProduct, True),
    )
    def on_patch(self, req: falcon.Request, resp: falcon.Response, product_id: uuid.UUID) -> None:
        require_admin(req)
        body = read_json(req, PatchProduct, max_bytes=self.max_body_bytes)
        patch = ProductPatch(
            name=body.name,
            description=body.description,
            price=_price(body.price) if body.price is not None else None,
            status=body.status,
            attributes=dict(body.attributes) if body.attributes is not None else None,
        )
        product = self.handlers.patch_product(product_id, patch, actor=principal(req).actor)
        resp.media = product_view(product)


class Attributes(_Resource):
    @contract(
        "Define a product attribute",
        (201, AttributeView, "created"),
        (400, 401, 403, 409, 413, 415, 422),
        body=(CreateAttribute, True),
    )
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        require_admin(req)
        body = read_json(req, CreateAttribute, max_bytes=self.max_body_bytes)
        attribute = self.handlers.create_attribute(body.code, body.label, body.searchable)
        resp.status = 201
        resp.location = f"/v1/admin/catalog/attributes/{attribute.code}"
        resp.media = attribute_view(attribute)

    @contract("List the attributes", (200, AttributeList, "every attribute, by code"), (401, 403))
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        require_admin(req)
        items = [attribute_model(a) for a in self.catalog.list_attributes()]
        resp.media = AttributeList(items=items).model_dump(mode="json")


class Attribute(_Resource):
    @contract(
        "Edit an attribute (label, searchable); the change is audited; a searchable flip queues a re-index",
        (200, AttributePatched, "the attribute as changed (with `reindex` when searchable flipped)"),
        (400, 401, 403, 404, 413, 415, 422),
        body=(PatchAttribute, True),
    )
    def on_patch(self, req: falcon.Request, resp: falcon.Response, code: str) -> None:
        require_admin(req)
        body = read_json(req, PatchAttribute, max_bytes=self.max_body_bytes)
        caller = principal(req)
        attribute, reindex = self.handlers.patch_attribute(
            code, label=body.label, searchable=body.searchable, actor=caller.actor, requester=caller.user_id
        )
        view = AttributePatched(**attribute_model(attribute).model_dump())
        if reindex is not None:  # the searchable flag flipped: a re-index was queued (or is live)
            view.reindex = ReindexStarted(
                operationId=reindex.operation.id, alreadyRunning=reindex.already_running
            )
        resp.media = view.model_dump(mode="json", exclude_none=True)
