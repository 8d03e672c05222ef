"""Secrets and personal data planted in feedback, for the tests that check no page or file shows them."""

AWS_KEY = "AKIA4HKQ2Z7XNB3LPQWE"
GITHUB_TOKEN = "ghp_8fK2mQ9xLr4TzW7vN1bC5yH3jD6sA0eP2uGi"
EMAIL = "jane.doe@acme-corp.com"
PHONE = "+44 20 7946 0958"
HOME = "/home/jdoe"
PLANTED = (AWS_KEY, GITHUB_TOKEN, EMAIL, PHONE, HOME)
