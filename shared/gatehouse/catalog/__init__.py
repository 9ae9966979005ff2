"""The B2B catalog: products and attributes (tables), their rules, and the store with the SQL.

Routes and job bodies stay thin and call ``CatalogStore``; the rules
(``gatehouse.catalog.rules``) are pure and shared by every path that changes
a product (the admin API now, bulk operations later).
"""

from gatehouse.catalog.rules import NewProduct, Price, ProductPatch
from gatehouse.catalog.store import CatalogStore
from gatehouse.catalog.tables import Attribute, AttributeRecord, Product, ProductRecord

__all__ = [
    "Attribute",
    "AttributeRecord",
    "CatalogStore",
    "NewProduct",
    "Price",
    "Product",
    "ProductPatch",
    "ProductRecord",
]
