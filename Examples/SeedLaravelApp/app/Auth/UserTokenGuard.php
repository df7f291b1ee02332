<?php

// The signed-in user from a bearer token: an HS256 JWT signed with the same secret the node is
// given (--user-token-secret), so one token works on both. Only PHP's hash_hmac, no package.
// A token is accepted when its header says HS256, its signature matches, it has not expired
// (exp, with 30 s of leeway, as the node allows by default), it is not early (nbf) and its `sub` is the
// numeric user id.

namespace App\Auth;

use Illuminate\Auth\GenericUser;
use Illuminate\Http\Request;

class UserTokenGuard
{
    private const LEEWAY_SECONDS = 30;

    public function __construct(private string $secret)
    {
    }

    /** The user the request's bearer token names, or null (Laravel then answers 401). */
    public function __invoke(Request $request): ?GenericUser
    {
        $token = $request->bearerToken();
        if ($token === null || $this->secret === '') {
            return null;
        }
        $parts = explode('.', $token);
        if (count($parts) !== 3) {
            return null;
        }
        [$header, $payload, $signature] = $parts;
        $expected = self::base64url(hash_hmac('sha256', $header . '.' . $payload, $this->secret, true));
        if (!hash_equals($expected, $signature)) {
            return null;
        }
        $head = json_decode(self::decode($header), true);
        $claims = json_decode(self::decode($payload), true);
        if (!is_array($head) || ($head['alg'] ?? null) !== 'HS256' || !is_array($claims)) {
            return null;
        }
        $now = time();
        if (!isset($claims['exp']) || !is_numeric($claims['exp']) || $claims['exp'] + self::LEEWAY_SECONDS < $now) {
            return null;
        }
        if (isset($claims['nbf']) && (!is_numeric($claims['nbf']) || $claims['nbf'] - self::LEEWAY_SECONDS > $now)) {
            return null;
        }
        $subject = $claims['sub'] ?? null;
        if (!is_string($subject) || !preg_match('/^[1-9][0-9]{0,18}$/', $subject)) {
            return null;
        }
        return new GenericUser(['id' => (int) $subject]);
    }

    private static function base64url(string $bytes): string
    {
        return rtrim(strtr(base64_encode($bytes), '+/', '-_'), '=');
    }

    private static function decode(string $text): string
    {
        return (string) base64_decode(strtr($text, '-_', '+/'), true);
    }
}
