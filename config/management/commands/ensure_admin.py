"""Create the admin login once and print it (every time, so `make run` always shows it)."""

import secrets

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management.base import BaseCommand

from core.roles import ADMIN


class Command(BaseCommand):
    help = "Create the 'admin' superuser if missing and print its login."

    def add_arguments(self, parser):
        parser.add_argument("--username", default="admin")

    def handle(self, *args, username, **options):
        login_file = settings.DATA_DIR / "admin-login.txt"
        User = get_user_model()
        if not User.objects.filter(username=username).exists():
            password = secrets.token_urlsafe(12)
            user = User.objects.create_superuser(username=username, email="", password=password)
            user.groups.add(Group.objects.get_or_create(name=ADMIN)[0])
            login_file.write_text(f"{username} {password}\n")
            login_file.chmod(0o600)
        if login_file.exists():
            user, password = login_file.read_text().split()
            self.stdout.write(f"Login: http://127.0.0.1:8000/login/  username: {user}  password: {password}")
        else:
            self.stdout.write(f"Login: user {username!r} exists; its password was set elsewhere")
