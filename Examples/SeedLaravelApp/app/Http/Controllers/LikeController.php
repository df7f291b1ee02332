<?php

// The seed's controller, statement for statement: the same lookups, the same lockForUpdate, the
// same transaction and answer. It is the baseline the bench measures, so it is not improved:
// two concurrent first likes of one pair both find no row to lock, both insert, and the second
// fails on the unique key (a 500, its transaction rolled back).

namespace App\Http\Controllers;

use App\Models\Like;
use App\Models\Post;
use Illuminate\Http\Request;
use Illuminate\Support\Facades\DB;

class LikeController extends Controller
{
    public function toggleLike(Request $request, $id)
    {
        $user = $request->user();
        $post = Post::findOrFail($id);

        $result = DB::transaction(function () use ($user, $post) {
            $existing = Like::where('user_id', $user->id)
                ->where('post_id', $post->id)
                ->lockForUpdate()
                ->first();

            if ($existing) {
                $existing->delete();
                $post->decrement('likes_count');
                $isLiked = false;
            } else {
                Like::create([
                    'user_id' => $user->id,
                    'post_id' => $post->id,
                ]);
                $post->increment('likes_count');
                $isLiked = true;
            }

            return [
                'is_liked' => $isLiked,
                'likes_count' => $post->fresh()->likes_count,
            ];
        });

        return response()->json($result);
    }
}
