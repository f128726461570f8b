import agent_handshake

from .models import Product


@agent_handshake.register(Product)
class ProductContent(agent_handshake.ContentConfig):
    content_type = "application/data"
    schema_type = "Product"
    title_field = "name"
    summary_field = "summary"
    section = "Shop"
    section_description = "Loose-leaf teas, teaware and gift sets, with prices in US dollars and stock levels."
    order = 30

    def get_queryset(self):
        return Product.objects.filter(is_active=True)

    def get_markdown(self, product):
        stock = f"{product.stock} in stock" if product.stock else "Out of stock"
        return (
            f"Price: ${product.price} · {stock} · SKU {product.sku} · "
            f"Category: {product.get_category_display()}\n\n{product.description}"
        )

    def get_payload(self, product):
        return {
            "schema": "https://schema.org/Product",
            "data": {
                "name": product.name,
                "sku": product.sku,
                "category": product.category,
                "price": str(product.price),
                "currency": "USD",
                "in_stock": product.stock > 0,
                "stock": product.stock,
                "image_url": product.image_url,
            },
        }
