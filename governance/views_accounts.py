"""Sign-in pages: the password step, an enrolled operator's code step, and TOTP set-up.

Plain forms, no script. An operator with TOTP passes the password step into a pending
state held in the (still anonymous) session for a few minutes; only the right code then
signs them in. A wrong code is reported to axes like a wrong password, so both count
toward the same lockout.
"""

from __future__ import annotations

from axes.handlers.proxy import AxesProxyHandler
from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth import login as auth_login
from django.contrib.auth.decorators import login_required
from django.contrib.auth.forms import AuthenticationForm
from django.contrib.auth.signals import user_login_failed
from django.contrib.auth.views import LoginView
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.decorators import method_decorator
from django.views.decorators.cache import never_cache

from governance import accounts
from governance.audit import Actor
from governance.errors import Conflict
from governance.models import User

PENDING = "iris_login_pending"
WRONG_CODE = "That code is not right, or it was already used. Enter the newest code from your app."


class CodeForm(forms.Form):
    code = forms.CharField(label="Code", max_length=16, strip=True)


@method_decorator(never_cache, name="dispatch")
class IrisLoginView(LoginView):
    redirect_authenticated_user = True

    def form_valid(self, form: AuthenticationForm) -> HttpResponse:
        user = form.get_user()
        if not accounts.totp_is_enrolled(user):
            return super().form_valid(form)
        # The password was right; the code decides. Nothing is signed in yet.
        self.request.session.cycle_key()
        self.request.session[PENDING] = {
            "user": user.pk,
            "backend": user.backend,
            "at": timezone.now().timestamp(),
            "next": self.get_success_url(),
        }
        return HttpResponseRedirect(reverse("login-code"))


def _pending_user(request: HttpRequest) -> tuple[User, dict] | None:
    pending = request.session.get(PENDING)
    if not isinstance(pending, dict):
        return None
    age = timezone.now().timestamp() - float(pending.get("at", 0))
    if age > settings.IRIS_LOGIN_SECOND_STEP_SECONDS:
        del request.session[PENDING]
        return None
    user_pk = pending.get("user")
    if user_pk is None:
        return None
    user = User.objects.filter(pk=user_pk, is_active=True).first()
    return (user, pending) if user is not None else None


@never_cache
def login_code(request: HttpRequest) -> HttpResponse:
    found = _pending_user(request)
    if found is None:
        messages.info(request, "Please sign in again.")
        return redirect("login")
    user, pending = found
    credentials = {"username": user.get_username()}
    form = CodeForm(request.POST or None)
    if request.method == "POST":
        if not AxesProxyHandler.is_allowed(request, credentials):
            request.session.pop(PENDING, None)
            user_login_failed.send(
                sender=__name__, credentials=credentials, request=request, iris_reason="bad-code"
            )
            return locked_out(request)
        if form.is_valid() and accounts.totp_check(user=user, code=form.cleaned_data["code"]):
            del request.session[PENDING]
            auth_login(request, user, backend=pending["backend"])
            return HttpResponseRedirect(pending["next"])
        if form.is_valid():
            form.add_error("code", WRONG_CODE)
            user_login_failed.send(
                sender=__name__, credentials=credentials, request=request, iris_reason="bad-code"
            )
            if getattr(request, "axes_locked_out", False):
                request.session.pop(PENDING, None)
                return locked_out(request)
    return render(request, "registration/login_code.html", {"form": form})


def locked_out(request: HttpRequest, *args: object) -> HttpResponse:
    """The lockout page (AXES_LOCKOUT_CALLABLE): a plain 429, never a 500."""
    minutes = max(1, int(settings.AXES_COOLOFF_TIME.total_seconds() // 60))
    return render(request, "registration/locked_out.html", {"minutes": minutes}, status=429)


def _grouped(secret: str) -> str:
    return " ".join(secret[i : i + 4] for i in range(0, len(secret), 4))


@never_cache
@login_required
def totp_setup(request: HttpRequest) -> HttpResponse:
    user = request.user
    # Behind login_required, so never the anonymous user.
    assert isinstance(user, User)
    if not user.is_operator:
        raise PermissionDenied("Two-step sign-in is for operators.")
    actor = Actor("operator", str(user.public_id))
    if accounts.totp_is_enrolled(user):
        return render(request, "registration/totp_setup.html", {"enrolled": True})
    form = CodeForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        if accounts.totp_enrolment_confirm(actor=actor, user=user, code=form.cleaned_data["code"]):
            messages.success(request, "Two-step sign-in is on. You will be asked for a code.")
            return redirect("totp-setup")
        form.add_error("code", WRONG_CODE)
    try:
        enrolment = accounts.totp_enrolment_start(actor=actor, user=user)
    except Conflict:  # confirmed meanwhile, in another tab
        return redirect("totp-setup")
    return render(
        request,
        "registration/totp_setup.html",
        {
            "enrolled": False,
            "form": form,
            "secret": _grouped(enrolment.secret),
            "uri": enrolment.uri,
        },
    )
