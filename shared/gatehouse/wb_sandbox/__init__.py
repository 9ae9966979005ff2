"""A local stand-in for the Wildberries seller API (gatehouse-wb-sandbox)."""
