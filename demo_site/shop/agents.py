import datetime
import re
import secrets
import unicodedata
from decimal import ROUND_HALF_UP, Decimal

from django.db import IntegrityError, connection, transaction
from django.utils import timezone

import agent_handshake
from agent_handshake import ActionFailed, Invocation, Outcome, capability
from agent_handshake.concierge import desk

from .models import Appointment, Order, Product


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


# --- MODE3: what the shop's own agent does for visiting agents ---------------------------------------------------


SKU = r"LK-[A-Z]{2,4}-\d{4}"
#: A SKU in words: not the start of a longer number ("LK-TEA-00012" is no SKU of the shop, not LK-TEA-0001).
SKU_IN_TEXT = rf"{SKU}(?!\d)"
ORDER_NUMBER = r"LK-\d{5}"
MONEY = {"type": "string", "pattern": r"^\d+\.\d{2}$"}


#: Words of product names that name no product in particular: "Do you have tea?" is no product's name.
GENERIC_WORDS = frozenset({"tea", "teas", "the", "of", "and", "with", "ml", "g", "l", "pieces", "tines"})
NAME_WORD = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
#: The shop's own name: its words ("Lantern", "Kettle") also start two products' names.
SHOP_NAME = re.compile(r"\blantern\s*(?:&|and)\s*kettle\b", re.IGNORECASE)


def _name_words(text: str) -> list[str]:
    """Lower-cased words without accents, in the singular ("whisks", "caddies"), numbers left out."""
    plain = unicodedata.normalize("NFKD", text.lower()).encode("ascii", "ignore").decode()
    return [_singular(word) for word in NAME_WORD.findall(plain) if not word.isdigit()]


def _singular(word: str) -> str:
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"  # "caddies"
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word


def _product_in(text: str, products: list[Product]) -> Product | None:
    """The one product ``text`` names: by SKU, by its whole name (the longest wins: "Gyokuro Gift Set"), or by part
    of it ("the Tokoname kyusu", "Dew of Yame", "the gaiwan"): the name's last word ("kyusu", before any comma:
    "Tokoname Red Clay Kyusu, 260 ml"), or two of its words, when no other product's name has that word (one of
    the two); the product sharing most words wins, and a tie ("darjeeling flush": two Darjeelings) names none."""
    skus = {sku.upper() for sku in re.findall(SKU_IN_TEXT, text, re.IGNORECASE)}
    if len(skus) == 1:
        sku = skus.pop()
        return next((product for product in products if product.sku == sku), None)
    lowered = text.lower()
    named = [product for product in products if product.name.lower() in lowered]
    if named:
        return max(named, key=lambda product: len(product.name))
    asked = set(_name_words(SHOP_NAME.sub(" ", text))) - GENERIC_WORDS
    words = {product.pk: set(_name_words(product.name)) - GENERIC_WORDS for product in products}
    owners: dict[str, int] = {}
    for bag in words.values():
        for word in bag:
            owners[word] = owners.get(word, 0) + 1
    scored = []
    for product in products:
        shared = asked & words[product.pk]
        own = {word for word in shared if owners[word] == 1}
        head = _name_words(product.name.split(",")[0])[-1:]
        if own and (len(shared) >= 2 or own & set(head)):
            scored.append((len(shared), product))
    if not scored:
        return None
    best = max(count for count, _ in scored)
    winners = [product for count, product in scored if count == best]
    return winners[0] if len(winners) == 1 else None


def _product_named(text: str) -> str | None:
    """The name of the one product ``text`` names (:func:`_product_in`), or None."""
    product = _product_in(text, list(Product.objects.filter(is_active=True)))
    return product.name if product else None


def _find_product(reference: str) -> Product:
    product = (
        Product.objects.filter(is_active=True, sku__iexact=reference).first()
        or Product.objects.filter(is_active=True, name__iexact=reference).first()
    )
    if product is None:
        raise ActionFailed(f"No product in the shop matches {reference!r}.", status=404)
    return product


@capability(
    description="Whether a product is in stock, and how many: by SKU (LK-TEA-0001) or product name.",
    action_type="query",
    intent="Check whether a product is in stock",
    examples=(
        "Is the Dew of Yame gyokuro in stock?",
        "Do you have LK-TEA-0001?",
        "How many kettles are left?",
        "Is this teapot available right now?",
        "Is it sold out?",
        "What quantity do you have of this tea?",
        "Is this item in stock?",
        "Do you have any left of this oolong?",
        "How many units of LK-TW-0003 do you have?",
        "Can I still buy this gift set, or has it sold out?",
        "Check the availability of the bamboo whisk",
        "Stock level for LK-TEA-0007",
        "Are there enough caddies for me to buy six?",
    ),
    input_schema={
        "type": "object",
        "required": ["product"],
        "additionalProperties": False,
        "properties": {"product": {"type": "string", "maxLength": 200, "description": "A product's SKU or name"}},
    },
    output_schema={
        "type": "object",
        "required": ["sku", "name", "in_stock", "stock", "price", "currency"],
        "properties": {
            "sku": {"type": "string"},
            "name": {"type": "string"},
            "in_stock": {"type": "boolean"},
            "stock": {"type": "integer", "minimum": 0},
            "price": MONEY,
            "currency": {"type": "string"},
            "url": {"type": "string"},
        },
    },
    extract=lambda text: {"product": _product_named(text)},
    applies_to={"shop.Product": lambda product: {"product": product.sku}},
)
def check_inventory(invocation: Invocation) -> Outcome:
    product = _find_product(invocation.input["product"])
    availability = f"{product.stock} in stock" if product.stock else "out of stock"
    return Outcome(
        {
            "sku": product.sku,
            "name": product.name,
            "in_stock": product.stock > 0,
            "stock": product.stock,
            "price": str(product.price),
            "currency": "USD",
            "url": product.get_absolute_url(),
        },
        answer=f"{product.name} ({product.sku}) is {availability} at ${product.price}.",
    )


@capability(
    description="The status of an order, given its number and the email address it was placed with.",
    action_type="query",
    intent="Track an order",
    examples=(
        "Where is my order LK-10001?",
        "Has order LK-10023 shipped yet?",
        "What's the status of my order?",
        "My order hasn't arrived",
        "When will my parcel be delivered?",
        "Track my order LK-10042",
        "Has my package been dispatched?",
        "Is anything holding up my order?",
        "I ordered last week and nothing has come",
        "Order LK-10007, placed with jane@example.com: what is its status?",
        "Is my delivery on its way?",
        "When did my order ship?",
    ),
    notes=("The order number and the email address must both match the order.",),
    scope="orders",
    input_schema={
        "type": "object",
        "required": ["order_number", "email"],
        "additionalProperties": False,
        "properties": {
            "order_number": {"type": "string", "pattern": f"^{ORDER_NUMBER}$", "description": "e.g. LK-10001"},
            "email": {"type": "string", "format": "email", "description": "The email the order was placed with"},
        },
    },
    output_schema={
        "type": "object",
        "required": ["order_number", "status", "placed_at", "items"],
        "properties": {
            "order_number": {"type": "string"},
            "status": {"enum": [choice.value for choice in Order.Status]},
            "placed_at": {"type": "string", "format": "date-time"},
            "shipped_at": {"type": ["string", "null"]},
            "tracking_code": {"type": ["string", "null"]},
            "items": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["sku", "name", "quantity"],
                    "properties": {
                        "sku": {"type": "string"},
                        "name": {"type": "string"},
                        "quantity": {"type": "integer"},
                    },
                },
            },
        },
    },
)
def order_status(invocation: Invocation) -> Outcome:
    number, email = invocation.input["order_number"], invocation.input["email"]
    order = Order.objects.filter(number=number, customer_email__iexact=email).prefetch_related("items__product").first()
    if order is None:  # the same answer for a wrong number and a wrong email: nothing to enumerate
        raise ActionFailed("No order matches that order number and email address.", status=404)
    items = [{"sku": i.product.sku, "name": i.product.name, "quantity": i.quantity} for i in order.items.all()]
    shipped = f", shipped {order.shipped_at:%d %B}" if order.shipped_at else ""
    tracking = f", tracking code {order.tracking_code}" if order.tracking_code else ""
    return Outcome(
        {
            "order_number": order.number,
            "status": order.status,
            "placed_at": order.placed_at.isoformat(),
            "shipped_at": order.shipped_at.isoformat() if order.shipped_at else None,
            "tracking_code": order.tracking_code or None,
            "items": items,
        },
        answer=f"Order {order.number} is {order.get_status_display().lower()}{shipped}{tracking}.",
    )


#: A number as written, whole: its sign ("-5", or with U+2212 MINUS SIGN) and any decimals ("1.5"), so that neither
#: reads as 5.
NUMBER = r"(?<![\w.,\-\u2212])[-\u2212]?\d+(?:[.,]\d+)*"
QUOTE_LINE = re.compile(
    rf"({NUMBER})\s*(?:x|×|of|pcs?)?\s*({SKU_IN_TEXT})|({SKU_IN_TEXT})\s*(?:x|×)\s*({NUMBER})", re.I
)
#: A quantity before a product's name: "15 Kettle Chai Masala Blend", "4 x Dew of Yame", "12 tins of sencha".
QUANTITY = re.compile(r"(?<![\w.,\-\u2212])([-\u2212]?\d{1,3})\s*(?:x\s*|×\s*)?(?=[^\W\d_])", re.I)
THOUSANDS = re.compile(r"-?\d{1,3}(?:,\d{3})+")
CENT = Decimal("0.01")
#: The most of one SKU a quote is for: a line's maximum, and the total of the lines naming the same SKU.
MAX_PER_SKU = 500


def _quantity(written: str) -> int | str:
    """A quantity as the agent wrote it: a whole number ("-5" too: the input schema refuses it, naming the line), or
    the text itself ("1.5"), which the schema refuses as not an integer."""
    number = written.replace("\u2212", "-")
    if THOUSANDS.fullmatch(number):
        number = number.replace(",", "")
    try:
        return int(number)
    except ValueError:
        return written


def _quote_lines(text: str) -> dict:
    """The lines of a quote request: "12 x LK-TEA-0001", or a quantity before each product's name or part of it
    ("4 Dew of Yame Gyokuro, 4 Uji Ceremonial Matcha and 4 Takayama chasen")."""
    lines = []
    for match in QUOTE_LINE.finditer(text):
        quantity, sku = (match.group(1), match.group(2)) if match.group(2) else (match.group(4), match.group(3))
        lines.append({"sku": sku.upper(), "quantity": _quantity(quantity)})
    if lines:
        return {"items": lines}
    products = list(Product.objects.filter(is_active=True))
    starts = list(QUANTITY.finditer(text))
    for index, match in enumerate(starts):
        end = starts[index + 1].start() if index + 1 < len(starts) else len(text)
        product = _product_in(text[match.end() : end], products)
        if product is not None:
            lines.append({"sku": product.sku, "quantity": _quantity(match.group(1))})
    return {"items": lines} if lines else {}


@capability(
    description="A price quote for quantities of products: volume discount, shipping and total, valid 14 days.",
    action_type="query",
    intent="Get a price quote",
    examples=(
        "Quote me 12 x LK-TEA-0001 and 3 x LK-TEA-0004",
        "How much would 20 tins cost with shipping?",
        "What discount do I get on a large order?",
        "Total price for 10 teapots, shipping included",
        "How much for 40 tins of sencha, delivered?",
        "Price 6 x LK-TW-0002 for me",
        "I want to buy 30 of these for an event: what's the total?",
        "Give me a quote for 50 units",
        "Calculate the cost of 8 teapots and 8 caddies",
        "Is there a discount if I buy in bulk?",
        "What would shipping add to an order of 5 items?",
    ),
    constraints=("Quotes are valid for 14 days.",),
    input_schema={
        "type": "object",
        "required": ["items"],
        "additionalProperties": False,
        "properties": {
            "items": {
                "type": "array",
                "minItems": 1,
                "maxItems": 20,
                "description": "Lines such as 12 x LK-TEA-0001",
                "items": {
                    "type": "object",
                    "required": ["sku", "quantity"],
                    "additionalProperties": False,
                    "properties": {
                        "sku": {"type": "string", "pattern": f"^{SKU}$"},
                        "quantity": {"type": "integer", "minimum": 1, "maximum": MAX_PER_SKU},
                    },
                },
            }
        },
    },
    output_schema={
        "type": "object",
        "required": ["lines", "subtotal", "discount", "shipping", "total", "currency", "valid_until"],
        "properties": {
            "lines": {"type": "array"},
            "subtotal": MONEY,
            "discount": MONEY,
            "shipping": MONEY,
            "total": MONEY,
            "currency": {"const": "USD"},
            "valid_until": {"type": "string", "format": "date"},
        },
    },
    extract=_quote_lines,
    applies_to={"shop.Product": lambda product: {"items": [{"sku": product.sku, "quantity": 1}]}},
    action_schema_type="QuoteAction",
)
def custom_quote(invocation: Invocation) -> Outcome:
    """10 % off from $150, 5 % from $75; shipping $6.50 under $50, free above."""
    lines, subtotal = [], Decimal("0")
    wanted: dict[str, int] = {}
    for line in invocation.input["items"]:
        wanted[line["sku"]] = wanted.get(line["sku"], 0) + line["quantity"]
    products = {p.sku: p for p in Product.objects.filter(sku__in=wanted, is_active=True)}
    unknown = sorted(set(wanted) - set(products))
    if unknown:
        raise ActionFailed(f"Unknown SKU(s): {', '.join(unknown)}.", fields=["input.items"])
    over = [f"{sku} ({quantity})" for sku, quantity in wanted.items() if quantity > MAX_PER_SKU]
    if over:  # as the input schema refuses one line over the maximum
        raise ActionFailed(
            f"At most {MAX_PER_SKU} of each SKU in a quote, its lines added up: {', '.join(over)}.",
            fields=["input.items"],
        )
    for sku, quantity in wanted.items():
        product = products[sku]
        total = (product.price * quantity).quantize(CENT)
        subtotal += total
        lines.append(
            {
                "sku": sku,
                "name": product.name,
                "quantity": quantity,
                "unit_price": str(product.price),
                "line_total": str(total),
                "available": product.stock >= quantity,
            }
        )
    rate = Decimal("0.10") if subtotal >= 150 else Decimal("0.05") if subtotal >= 75 else Decimal("0")
    discount = (subtotal * rate).quantize(CENT, ROUND_HALF_UP)
    shipping = Decimal("6.50") if subtotal - discount < 50 else Decimal("0.00")
    total = subtotal - discount + shipping
    valid_until = timezone.localdate() + datetime.timedelta(days=14)
    short = [line["sku"] for line in lines if not line["available"]]
    note = f" Not enough stock yet for {', '.join(short)}." if short else ""
    return Outcome(
        {
            "lines": lines,
            "subtotal": str(subtotal),
            "discount": str(discount),
            "shipping": str(shipping),
            "total": str(total),
            "currency": "USD",
            "valid_until": valid_until.isoformat(),
        },
        answer=f"{len(lines)} line(s): subtotal ${subtotal}, discount ${discount}, shipping ${shipping}, "
        f"total ${total} (valid until {valid_until:%d %B %Y}).{note}",
    )


OPENING_HOURS = (datetime.time(10, 0), datetime.time(17, 0))  # Tuesday to Saturday
#: How long each service takes (Appointment.Service's labels): a booking ends by closing time.
DURATIONS = {
    Appointment.Service.TASTING: datetime.timedelta(minutes=45),
    Appointment.Service.TEAWARE: datetime.timedelta(minutes=30),
}


@capability(
    description="Book a tea tasting or a teaware consultation in the shop (Tue-Sat, 10:00-17:00, on the hour "
    "or half hour). Creates a booking.",
    action_type="action",
    intent="Book a tasting or a teaware consultation",
    examples=(
        "Book a tea tasting for 2 next Saturday at 11:00",
        "I'd like a teaware consultation on Thursday afternoon",
        "Can I reserve a tasting under the name Jane Smith?",
        "Can I make an appointment?",
        "Reserve a tasting for four people on Friday",
        "Book me in for a tea tasting next week",
        "Schedule a teaware consultation for Tuesday at 14:30",
        "Is there a free slot for a tasting on Saturday afternoon?",
        "I want to come into the shop for a tasting session",
        "Set up a visit to get advice on choosing teaware in person",
    ),
    constraints=(
        "Tuesday to Saturday, 10:00 to 17:00, on the hour or half hour, ending by 17:00 (tastings 45 min)",
        "From tomorrow up to 90 days ahead",
        "Up to 6 people",
    ),
    input_schema={
        "type": "object",
        "required": ["service", "date", "time", "name", "email"],
        "additionalProperties": False,
        "properties": {
            "service": {"enum": [choice.value for choice in Appointment.Service], "description": "What to book"},
            "date": {"type": "string", "format": "date", "description": "The day, as YYYY-MM-DD"},
            "time": {"type": "string", "pattern": r"^([01]\d|2[0-3]):(00|30)(:00)?$", "description": "HH:MM"},
            "name": {"type": "string", "minLength": 1, "maxLength": 120, "description": "Who is coming"},
            # An address has at most 254 characters (RFC 5321), as Appointment.email holds.
            "email": {"type": "string", "format": "email", "maxLength": 254, "description": "For the confirmation"},
            "party_size": {"type": "integer", "minimum": 1, "maximum": 6},
        },
    },
    output_schema={
        "type": "object",
        "required": ["reference", "service", "date", "time", "name", "party_size"],
        "properties": {
            "reference": {"type": "string", "pattern": "^BK-[0-9A-F]{6}$"},
            "service": {"type": "string"},
            "date": {"type": "string", "format": "date"},
            "time": {"type": "string"},
            "name": {"type": "string"},
            "party_size": {"type": "integer"},
        },
    },
)
def book_appointment(invocation: Invocation) -> Outcome:
    data = invocation.input
    if not data["name"].strip():  # minLength 1 counts spaces; the shop would expect nobody in particular
        raise ActionFailed("The booking needs the name of who is coming.", fields=["input.name"])
    day = datetime.date.fromisoformat(data["date"])
    at = datetime.time.fromisoformat(data["time"])
    today = timezone.localdate()
    if not today < day <= today + datetime.timedelta(days=90):
        raise ActionFailed("Bookings are taken from tomorrow up to 90 days ahead.", fields=["input.date"])
    if day.weekday() in (0, 6):  # the day is what to change, not the time
        raise ActionFailed(
            f"The shop is closed on {day:%A}s; it takes bookings Tuesday to Saturday, 10:00 to 17:00.",
            fields=["input.date"],
        )
    if not OPENING_HOURS[0] <= at < OPENING_HOURS[1]:
        raise ActionFailed("The shop takes bookings Tuesday to Saturday, 10:00 to 17:00.", fields=["input.time"])
    ends = (datetime.datetime.combine(day, at) + DURATIONS[data["service"]]).time()
    if ends > OPENING_HOURS[1]:  # a 45-minute tasting at 16:30 would run past closing
        raise ActionFailed(
            f"A {Appointment.Service(data['service']).label} booked at {at:%H:%M} would end at {ends:%H:%M}, after "
            f"the shop closes at {OPENING_HOURS[1]:%H:%M}; choose an earlier time.",
            fields=["input.time"],
        )
    taken = f"{day:%A %d %B} at {at:%H:%M} is already booked; try another time."
    try:
        with transaction.atomic():
            # The slot constraint only sees bookings at the same time; a 45-minute tasting at 10:00 also takes
            # 10:30. One booking of a service and day at a time (a lock until commit), so two agents booking
            # overlapping slots at once cannot both find them free.
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [f"shop-booking:{data['service']}:{day}"])
            length = DURATIONS[data["service"]]
            start = datetime.datetime.combine(day, at)
            for other in Appointment.objects.filter(service=data["service"], date=day).values_list("time", flat=True):
                if abs(datetime.datetime.combine(day, other) - start) < length:
                    raise ActionFailed(taken, status=409)
            booking = Appointment.objects.create(
                reference=f"BK-{secrets.token_hex(3).upper()}",
                service=data["service"],
                date=day,
                time=at,
                name=data["name"],
                email=data["email"],
                party_size=data.get("party_size", 1),
                booked_by=str(invocation.client or ""),
            )
    except IntegrityError:
        raise ActionFailed(taken, status=409) from None
    label = booking.get_service_display()
    return Outcome(
        {
            "reference": booking.reference,
            "service": booking.service,
            "date": day.isoformat(),
            "time": at.strftime("%H:%M"),
            "name": booking.name,
            "party_size": booking.party_size,
        },
        answer=f"Booked: {label} on {day:%A %d %B %Y} at {at:%H:%M} for {booking.name}, reference {booking.reference}.",
        side_effects=[{"type": "booking_created", "description": f"Appointment {booking.reference} was created."}],
    )


desk.register_escalation(
    description="Pass a question or request to a person at Lantern & Kettle (wholesale, custom blends, "
    "complaints); the answer arrives by poll or callback.",
    examples=(
        "I'd like to speak to someone",
        "Can a person help me with a custom order?",
        "Connect me with a member of staff",
        "Can someone help me set up a wholesale account?",
        "I want to make a complaint",
        "Please ask a person to get back to me",
        "I need a custom blend made for my business",
        "Let me talk to a human",
        "I'd like a member of your team to look into my problem",
        "My teapot arrived broken and I want someone to sort it out",
        "Leave a message for your staff to answer when they're in",
        "This needs a person, not an automated answer",
        "Put me through to your wholesale team",
        "I'm unhappy with my purchase and want to raise it with your staff",
    ),
)
