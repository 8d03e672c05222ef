"""The ground floor: what several apps share (API errors and body parsing,
token-or-session authentication, roles, job runs, dates, ids, redirects, CSV
cells). It imports no app of the project; the apps import it."""
