#!/usr/bin/env python
from __future__ import annotations

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "iris_site.settings")
    from django.core.management import execute_from_command_line

    from iris_site.env import SettingsError, exit_on_settings_error

    try:
        execute_from_command_line(sys.argv)
    except SettingsError as exc:
        exit_on_settings_error(exc)


if __name__ == "__main__":
    main()
