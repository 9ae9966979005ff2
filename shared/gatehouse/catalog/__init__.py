"""The B2B catalog: products and attributes.

- ``tables``: their declarations; ``rules``: pure checks shared by every path that changes a product;
- ``store``: products' and attributes' SQL; ``bulk``: bulk operations and search re-indexes;
- ``documents``: what a product's search document holds, kept current by every change;
- ``handlers``: the use cases the routes, the console and the job bodies call.
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
