"""The platform's management API: the HTTP client with retries (`client`), pacing under the rate
limits (`pacing`), the cursor pager (`paging`) and project discovery (`discovery`). Knows nothing of
storage.
"""
