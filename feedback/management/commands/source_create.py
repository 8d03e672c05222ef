from django.core.management.base import BaseCommand, CommandError

from feedback import services
from feedback.models import ApiToken, Source


class Command(BaseCommand):
    help = "Create a source; prints its signing secret and an API token once."

    def add_arguments(self, parser):
        parser.add_argument("name")
        parser.add_argument("--secret", help="use this whsec_ secret instead of a new random one")
        parser.add_argument("--kind", choices=Source.Kind.values, default=Source.Kind.PRODUCT)
        parser.add_argument(
            "--scopes",
            default=ApiToken.Scope.REPORTS,
            help=f"what the token may do, comma-separated: {', '.join(ApiToken.Scope.values)} (default: reports)",
        )

    def handle(self, *args, name, secret, kind, scopes, **options):
        scopes = [scope.strip() for scope in scopes.split(",") if scope.strip()]
        if not scopes or not set(scopes) <= set(ApiToken.Scope.values):
            raise CommandError(f"--scopes: use some of {', '.join(ApiToken.Scope.values)}")
        try:
            source, secret = services.source_create(name=name, kind=kind, secret=secret)
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        _, token = services.api_token_create(source=source, name="created with source_create", scopes=scopes)
        self.stdout.write(f"source: {source.slug}")
        self.stdout.write(f"webhook: /api/v1/sources/{source.slug}/events")
        self.stdout.write(f"secret: {secret}")
        self.stdout.write(f"token: {token}")
        self.stdout.write(f"token scopes: {', '.join(scopes)}")
