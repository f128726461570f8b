from django.contrib import admin

from .models import Appointment, Order, OrderItem, Product


@admin.register(Product)
class ProductAdmin(admin.ModelAdmin):
    list_display = ("name", "sku", "category", "price", "stock", "is_active")
    list_filter = ("category", "is_active")
    search_fields = ("name", "sku", "summary")
    prepopulated_fields = {"slug": ("name",)}


class OrderItemInline(admin.TabularInline):
    model = OrderItem
    extra = 0


@admin.register(Order)
class OrderAdmin(admin.ModelAdmin):
    list_display = ("number", "customer_email", "status", "placed_at")
    list_filter = ("status",)
    search_fields = ("number", "customer_email")
    inlines = [OrderItemInline]


@admin.register(Appointment)
class AppointmentAdmin(admin.ModelAdmin):
    list_display = ("reference", "service", "date", "time", "name", "party_size", "booked_by")
    list_filter = ("service", "date")
    search_fields = ("reference", "name", "email")
