from django.db import models
from django.urls import reverse


class Product(models.Model):
    class Category(models.TextChoices):
        TEA = "tea", "Tea"
        TEAWARE = "teaware", "Teaware"
        ACCESSORY = "accessory", "Accessory"
        GIFT = "gift", "Gift set"

    name = models.CharField(max_length=200)
    slug = models.SlugField(unique=True)
    sku = models.CharField(max_length=32, unique=True)
    category = models.CharField(max_length=20, choices=Category.choices)
    summary = models.CharField(max_length=300)
    description = models.TextField(help_text="Markdown")
    price = models.DecimalField(max_digits=8, decimal_places=2)
    stock = models.PositiveIntegerField(default=0)
    image_url = models.URLField(max_length=500, blank=True)
    is_active = models.BooleanField(default=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self):
        return self.name

    def get_absolute_url(self):
        return reverse("shop:product", args=[self.slug])


class Order(models.Model):
    class Status(models.TextChoices):
        PLACED = "placed", "Placed"
        PACKED = "packed", "Packed"
        SHIPPED = "shipped", "Shipped"
        DELIVERED = "delivered", "Delivered"
        CANCELLED = "cancelled", "Cancelled"

    number = models.CharField(max_length=20, unique=True)
    customer_email = models.EmailField()
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.PLACED)
    placed_at = models.DateTimeField()
    shipped_at = models.DateTimeField(null=True, blank=True)
    tracking_code = models.CharField(max_length=40, blank=True)

    class Meta:
        ordering = ["-placed_at"]

    def __str__(self):
        return self.number


class OrderItem(models.Model):
    order = models.ForeignKey(Order, on_delete=models.CASCADE, related_name="items")
    product = models.ForeignKey(Product, on_delete=models.PROTECT, related_name="+")
    quantity = models.PositiveIntegerField()
    unit_price = models.DecimalField(max_digits=8, decimal_places=2)

    def __str__(self):
        return f"{self.quantity} x {self.product}"


class Appointment(models.Model):
    """A booking made in the shop, by a person or, through the book_appointment capability, by an agent."""

    class Service(models.TextChoices):
        TASTING = "tea-tasting", "Tea tasting (45 min)"
        TEAWARE = "teaware-consultation", "Teaware consultation (30 min)"

    reference = models.CharField(max_length=12, unique=True)
    service = models.CharField(max_length=24, choices=Service.choices)
    date = models.DateField()
    time = models.TimeField()
    name = models.CharField(max_length=120)
    email = models.EmailField()
    party_size = models.PositiveSmallIntegerField(default=1)
    booked_by = models.CharField(max_length=128, blank=True, help_text="The agent client that booked it, if any.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["date", "time"]
        constraints = [models.UniqueConstraint(fields=["service", "date", "time"], name="shop_one_booking_per_slot")]

    def __str__(self):
        return f"{self.reference} · {self.get_service_display()} · {self.date} {self.time:%H:%M}"
